/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MC_VERBS_FAKE_H
#define MC_VERBS_FAKE_H

/*
 * A test double for struct mc_verbs_ops: N fake NICs inside one process.  MRs with lkey/rkey
 * checks, RC QPs with the RESET/INIT/RTR/RTS/ERR state machine, RDMA WRITE/READ done by memcpy
 * against the peer QP's registered memory, CQs, completion channels whose fd is a pipe, and
 * fault injection.  Thread-safe (one global mutex).  Tests only.
 */
#include "rdma/verbs.h"

const struct mc_verbs_ops *vf_ops(void);
/* Start over with n NICs named vf0..vf<n-1> (port 1 active, LID 0x10+i). */
void vf_reset(int n);
/* The n-th work request executed from now (1 = the next one) completes with status st. */
void vf_fail_nth(int n, enum ibv_wc_status st);
/* Take a NIC's port down (0) or up (1).  Work through a down port fails with RETRY_EXC_ERR. */
void vf_set_port(int nic, int up);
/* Bytes moved by work requests posted on a NIC. */
unsigned long long vf_bytes(int nic);
/* Events given out by get_cq_event but not acknowledged, over live CQs. */
unsigned long vf_unacked(void);
/* Events given out, in total. */
unsigned long vf_events(void);
/* Completions lost to a full CQ; destroy_cq refused for unacknowledged events. */
unsigned long vf_cq_overruns(void);
unsigned long vf_destroy_busy(void);
/* Live objects (contexts + PDs + MRs + CQs + QPs + channels): 0 after a clean teardown. */
int vf_live(void);
/* How many live QPs are in state st. */
int vf_qps_in(enum ibv_qp_state st);
/* Error completions generated (not counting flushes). */
unsigned long vf_errors(void);
/* Mark [addr, addr+len) as GPU memory: reg_mr on it fails with EFAULT unless reg_ok (peer
 * memory support, as nvidia-peermem or dma-buf give).  vf_reset clears it. */
void vf_set_device_mem(void *addr, size_t len, int reg_ok);
/* Registrations of the device range that succeeded. */
unsigned long vf_device_regs(void);
/* The NICs' max_mr_size (0: unlimited); reg_mr of more fails with EIO.  Read when a NIC is
 * opened.  vf_reset clears it. */
void vf_set_max_mr_size(uint64_t n);
/* The n-th work request posted from now (1 = the next) is lost: no completion until its QP is
 * moved to ERR, which flushes it (WR_FLUSH_ERR). */
void vf_hold_nth(int n);
/* The source GID index of the last QP moved to RTR (-1 without GRH). */
long vf_last_sgid(void);

#endif
