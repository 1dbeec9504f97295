/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MC_ENGINE_PY_H
#define MC_ENGINE_PY_H

/* Shared by the files of the mooncake._engine extension (see engine_module.c). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>

#include "mooncake/transfer_engine_c.h"

struct mc_py_engine {
	PyObject_HEAD
	transfer_engine_t e;
};

/* Submit n requests to the segment target and wait for all of them (GIL released by the
 * caller), bounded by MC_TRANSFER_TIMEOUT.  nic: upstream's nic_hint (NULL or "": none).
 * Returns 0 or -1. */
int mc_pe_run(transfer_engine_t e, const char *target, int opcode, const uint64_t *bufs,
	      const uint64_t *peers, const uint64_t *lens, size_t n, const char *nic);
/* Submit without waiting: the batch id, or 0 on failure. */
batch_id_t mc_pe_submit(transfer_engine_t e, const char *target, int opcode,
			const uint64_t *bufs, const uint64_t *peers, const uint64_t *lens,
			size_t n, const char *nic);
/* 1 all completed (the batch is freed), 0 still running, -1 failed (freed once finished). */
int mc_pe_check(transfer_engine_t e, batch_id_t b);
/* Seconds on the monotonic clock, and MC_TRANSFER_TIMEOUT (at least 5). */
double mc_pe_now(void);
double mc_pe_timeout(void);

/* engine_py_arrays.c: the array, page and scatter forms (methods of TransferEngine). */
PyObject *mc_pe_sync_write_arrays(struct mc_py_engine *self, PyObject *args, PyObject *kw);
PyObject *mc_pe_sync_read_arrays(struct mc_py_engine *self, PyObject *args, PyObject *kw);
PyObject *mc_pe_async_write_arrays(struct mc_py_engine *self, PyObject *args, PyObject *kw);
PyObject *mc_pe_async_read_arrays(struct mc_py_engine *self, PyObject *args, PyObject *kw);
PyObject *mc_pe_sync_write_pages(struct mc_py_engine *self, PyObject *args, PyObject *kw);
PyObject *mc_pe_sync_read_pages(struct mc_py_engine *self, PyObject *args, PyObject *kw);
PyObject *mc_pe_scatter_submit(struct mc_py_engine *self, PyObject *args, PyObject *kw);
PyObject *mc_pe_batch_poll(struct mc_py_engine *self, PyObject *args, PyObject *kw);

#endif
