// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* An MPI job whose every result is checked (tests/integration/cluster_test.sh): point-to-point
 * around a ring at sizes from one byte to 4 MiB (eager and rendezvous: RDMA READs or WRITEs
 * under UCX), Allreduce, Alltoall and Bcast against the values they must give. Built with each
 * MPI's own compiler wrapper at test time. Prints one line per rank; exits 1 on any mismatch. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size;
static int errors;

static void check(int ok, const char* what, long detail) {
    if (ok) return;
    if (errors++ < 5) fprintf(stderr, "rank %d: %s wrong (%ld)\n", rank, what, detail);
}

/* The byte at offset i of the message rank `from` sends in round `round`. */
static uint8_t pattern(int from, int round, size_t i) {
    return (uint8_t)(i * 131 + (size_t)from * 17 + (size_t)round * 7 + (i >> 12));
}

static void ring(size_t len, int round) {
    uint8_t* out = malloc(len);
    uint8_t* in = malloc(len);
    if (!out || !in) MPI_Abort(MPI_COMM_WORLD, 2);
    for (size_t i = 0; i < len; ++i) out[i] = pattern(rank, round, i);
    memset(in, 0xee, len);
    int to = (rank + 1) % size, from = (rank + size - 1) % size;
    MPI_Status st;
    MPI_Sendrecv(out, (int)len, MPI_BYTE, to, round, in, (int)len, MPI_BYTE, from, round,
                 MPI_COMM_WORLD, &st);
    int got = 0;
    MPI_Get_count(&st, MPI_BYTE, &got);
    check(got == (int)len, "ring message length", got);
    size_t bad = 0;
    for (size_t i = 0; i < len; ++i) bad += in[i] != pattern(from, round, i);
    check(bad == 0, "ring message bytes", (long)bad);
    free(out);
    free(in);
}

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    char host[MPI_MAX_PROCESSOR_NAME];
    int hlen = 0;
    MPI_Get_processor_name(host, &hlen);

    static const size_t sizes[] = {1, 100, 4096, 65536, 1 << 20, 4 << 20};
    for (int r = 0; r < (int)(sizeof sizes / sizeof sizes[0]); ++r) ring(sizes[r], r);

    enum { kN = 100000 };
    long* v = malloc(kN * sizeof *v);
    long* sum = malloc(kN * sizeof *sum);
    for (long i = 0; i < kN; ++i) v[i] = i * (rank + 1);
    MPI_Allreduce(v, sum, kN, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    long tri = (long)size * (size + 1) / 2, bad = 0;
    for (long i = 0; i < kN; ++i) bad += sum[i] != i * tri;
    check(bad == 0, "Allreduce", bad);

    enum { kPer = 5000 };
    int* a_out = malloc((size_t)size * kPer * sizeof(int));
    int* a_in = malloc((size_t)size * kPer * sizeof(int));
    for (int j = 0; j < size; ++j)
        for (int k = 0; k < kPer; ++k) a_out[j * kPer + k] = (rank * 1000 + j) * kPer + k;
    MPI_Alltoall(a_out, kPer, MPI_INT, a_in, kPer, MPI_INT, MPI_COMM_WORLD);
    bad = 0;
    for (int j = 0; j < size; ++j)
        for (int k = 0; k < kPer; ++k) bad += a_in[j * kPer + k] != (j * 1000 + rank) * kPer + k;
    check(bad == 0, "Alltoall", bad);

    size_t blen = 3 << 20;
    uint8_t* b = malloc(blen);
    for (size_t i = 0; i < blen; ++i) b[i] = rank == 0 ? pattern(0, 99, i) : 0;
    MPI_Bcast(b, (int)blen, MPI_BYTE, 0, MPI_COMM_WORLD);
    bad = 0;
    for (size_t i = 0; i < blen; ++i) bad += b[i] != pattern(0, 99, i);
    check(bad == 0, "Bcast", bad);

    int all = 0;
    MPI_Allreduce(&errors, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    printf("rank %d of %d on %s: %s\n", rank, size, host, errors ? "FAILED" : "ok");
    fflush(stdout);
    MPI_Finalize();
    return all ? 1 : 0;
}
