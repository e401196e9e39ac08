// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// verbs_allow_disassociate_destroy, the one variable of rdma-core's provider interface,
// in the IBVERBS_PRIVATE_NN node of every release (libibverbs.map says why there are
// several): the default version in the newest node, the same object under the older
// ones. A variable cannot be reached through a tail jump as private_abi_older.cpp's
// functions are, so its versions are bound here, to an internal name and an alias of it
// (a .symver'd name that is also defined unversioned in the same file loses its default
// version).

// Set from RDMAV_ALLOW_DISASSOC_DESTROY in rdma-core; it only matters when a kernel
// device is hot-unplugged, which cannot happen here.
extern "C" {
bool uroce_verbs_allow_disassociate_destroy = false;
extern bool uroce_verbs_allow_disassociate_destroy_older
    __attribute__((alias("uroce_verbs_allow_disassociate_destroy")));
}

__asm__(
    ".symver uroce_verbs_allow_disassociate_destroy, "
    "verbs_allow_disassociate_destroy@@IBVERBS_PRIVATE_64\n"
    ".symver uroce_verbs_allow_disassociate_destroy_older, "
    "verbs_allow_disassociate_destroy@IBVERBS_PRIVATE_59\n"
    ".symver uroce_verbs_allow_disassociate_destroy_older, "
    "verbs_allow_disassociate_destroy@IBVERBS_PRIVATE_57\n"
    ".symver uroce_verbs_allow_disassociate_destroy_older, "
    "verbs_allow_disassociate_destroy@IBVERBS_PRIVATE_34\n");
