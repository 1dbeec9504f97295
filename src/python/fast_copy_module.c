/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mooncake._fast_copy: concat_arrays_into(arrays, dest_ptr, dest_size, start=0, count=-1,
 * nthreads=1) copies the bytes of arrays[start:start+count] back to back into the memory at
 * dest_ptr and returns how many bytes it copied (upstream's helper of the same name).
 *
 * Every item must export a C-contiguous buffer (numpy arrays do; an item without the buffer
 * protocol is a TypeError, a strided one a ValueError); their total must fit in dest_size
 * (ValueError).  The copy runs with the GIL released, split over up to nthreads threads by
 * item; the buffers stay exported (pinned) until it is done.  Module-level, no state.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

struct fc_work {
	Py_buffer *views;	/* this thread's items */
	Py_ssize_t n;
	char *dst;		/* where its first item goes */
};

static void *fc_copy(void *arg)
{
	struct fc_work *w = arg;
	char *d = w->dst;
	Py_ssize_t i;

	for (i = 0; i < w->n; i++) {
		memcpy(d, w->views[i].buf, (size_t)w->views[i].len);
		d += w->views[i].len;
	}
	return NULL;
}

/* Copy with the GIL released; a thread that cannot be started is done inline. */
static void fc_run(struct fc_work *works, int nt)
{
	pthread_t tid[64];
	int started[64] = { 0 };
	int t;

	Py_BEGIN_ALLOW_THREADS
	for (t = 1; t < nt; t++)
		started[t] = pthread_create(&tid[t], NULL, fc_copy, &works[t]) == 0;
	for (t = 1; t < nt; t++)
		if (!started[t])
			fc_copy(&works[t]);
	fc_copy(&works[0]);
	for (t = 1; t < nt; t++)
		if (started[t])
			pthread_join(tid[t], NULL);
	Py_END_ALLOW_THREADS
}

static PyObject *fc_concat_arrays_into(PyObject *self, PyObject *args)
{
	PyObject *list, *res = NULL;
	unsigned long long dst, dst_size;
	Py_ssize_t start = 0, count = -1, len, held = 0, i, per, s;
	int nthreads = 1, nt = 0;
	Py_buffer *views = NULL;
	struct fc_work works[64];
	size_t total = 0;

	(void)self;
	if (!PyArg_ParseTuple(args, "O!KK|nni:concat_arrays_into", &PyList_Type, &list, &dst,
			      &dst_size, &start, &count, &nthreads))
		return NULL;
	len = PyList_GET_SIZE(list);
	if (start < 0)
		start = 0;
	if (start > len)
		start = len;
	if (count < 0 || count > len - start)
		count = len - start;
	if (count == 0)
		return PyLong_FromSize_t(0);
	nthreads = nthreads < 1 ? 1 : nthreads > 64 ? 64 : nthreads;
	if (nthreads > count)
		nthreads = (int)count;
	views = PyMem_Calloc((size_t)count, sizeof(*views));
	if (views == NULL)
		return PyErr_NoMemory();
	for (i = 0; i < count; i++, held++) {
		PyObject *item = PyList_GET_ITEM(list, start + i);

		if (!PyObject_CheckBuffer(item)) {
			PyErr_Format(PyExc_TypeError, "arrays[%zd] is not an ndarray", start + i);
			goto out;
		}
		if (PyObject_GetBuffer(item, &views[i], PyBUF_C_CONTIGUOUS) != 0) {
			PyErr_Clear();
			PyErr_Format(PyExc_ValueError, "arrays[%zd] is not C-contiguous", start + i);
			goto out;
		}
		if ((size_t)views[i].len > SIZE_MAX - total) {
			PyErr_SetString(PyExc_OverflowError, "array byte sizes overflow");
			held++;
			goto out;
		}
		total += (size_t)views[i].len;
	}
	if (total > dst_size) {
		PyErr_Format(PyExc_ValueError, "destination buffer too small: need %zu bytes, got %llu",
			     total, dst_size);
		goto out;
	}
	if (total && dst == 0) {
		PyErr_SetString(PyExc_ValueError, "dest_ptr is null");
		goto out;
	}
	per = (count + nthreads - 1) / nthreads;
	{
		char *d = (char *)(uintptr_t)dst;

		for (s = 0; s < count; s += per, nt++) {
			works[nt].views = views + s;
			works[nt].n = s + per > count ? count - s : per;
			works[nt].dst = d;
			for (i = 0; i < works[nt].n; i++)
				d += works[nt].views[i].len;
		}
	}
	fc_run(works, nt);
	res = PyLong_FromSize_t(total);
out:
	for (i = 0; i < held; i++)
		PyBuffer_Release(&views[i]);
	PyMem_Free(views);
	return res;
}

static PyMethodDef fc_methods[] = {
	{ "concat_arrays_into", fc_concat_arrays_into, METH_VARARGS,
	  "concat_arrays_into(arrays, dest_ptr, dest_size, start=0, count=-1, nthreads=1): copy "
	  "arrays[start:start+count] back to back to dest_ptr (GIL released); the bytes copied." },
	{ NULL, NULL, 0, NULL },
};

static struct PyModuleDef fc_module = {
	PyModuleDef_HEAD_INIT, "_fast_copy", "Scatter-gather copy of a list of arrays.", -1,
	fc_methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__fast_copy(void)
{
	return PyModule_Create(&fc_module);
}
