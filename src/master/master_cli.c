/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mooncake_master's main.  The daemon is mc_master_main (master_main.c), in the master's
 * library so that a store client can run the same master on its own loop.
 */
#include "master/master.h"

int main(int argc, char **argv)
{
	return mc_master_main(argc, argv);
}
