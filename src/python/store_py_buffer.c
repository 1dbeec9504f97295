/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mooncake._store: BufferHandle (an object's bytes, owned by the handle and readable through
 * the buffer protocol; freed when the handle goes) and the module's host_alloc/host_free
 * (4 KiB-aligned host memory for callers that register their own buffers).
 */
#include <stdlib.h>

#include "python/store_py.h"

struct mc_py_buffer {
	PyObject_HEAD
	void *data;
	Py_ssize_t size;
	Py_ssize_t exports;
};

PyObject *mc_py_buffer_new_from(void *data, Py_ssize_t size)
{
	struct mc_py_buffer *b = PyObject_New(struct mc_py_buffer, &mc_py_buffer_type);

	if (b == NULL) {
		free(data);
		return NULL;
	}
	b->data = data;
	b->size = size;
	b->exports = 0;
	return (PyObject *)b;
}


static int mc_py_buffer_getbuf(struct mc_py_buffer *self, Py_buffer *view, int flags)
{
	if (PyBuffer_FillInfo(view, (PyObject *)self, self->data, self->size, 1, flags))
		return -1;
	self->exports++;
	return 0;
}

static void mc_py_buffer_releasebuf(struct mc_py_buffer *self, Py_buffer *view)
{
	(void)view;
	self->exports--;
}

static void mc_py_buffer_dealloc(struct mc_py_buffer *self)
{
	free(self->data);
	PyObject_Free(self);
}

static PyObject *mc_py_buffer_ptr(struct mc_py_buffer *self, PyObject *unused)
{
	(void)unused;
	return PyLong_FromUnsignedLongLong((unsigned long long)(uintptr_t)self->data);
}

static PyObject *mc_py_buffer_size(struct mc_py_buffer *self, PyObject *unused)
{
	(void)unused;
	return PyLong_FromSsize_t(self->size);
}

static Py_ssize_t mc_py_buffer_len(struct mc_py_buffer *self)
{
	return self->size;
}

static PyBufferProcs mc_py_buffer_procs = {
	.bf_getbuffer = (getbufferproc)mc_py_buffer_getbuf,
	.bf_releasebuffer = (releasebufferproc)mc_py_buffer_releasebuf,
};

static PySequenceMethods mc_py_buffer_seq = {
	.sq_length = (lenfunc)mc_py_buffer_len,
};

static PyMethodDef mc_py_buffer_methods[] = {
	{ "ptr", (PyCFunction)mc_py_buffer_ptr, METH_NOARGS, "Address of the data." },
	{ "size", (PyCFunction)mc_py_buffer_size, METH_NOARGS, "Bytes." },
	{ NULL, NULL, 0, NULL },
};

PyTypeObject mc_py_buffer_type = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "mooncake._store.BufferHandle",
	.tp_basicsize = sizeof(struct mc_py_buffer),
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "An object's bytes, readable through the buffer protocol.",
	.tp_dealloc = (destructor)mc_py_buffer_dealloc,
	.tp_as_buffer = &mc_py_buffer_procs,
	.tp_as_sequence = &mc_py_buffer_seq,
	.tp_methods = mc_py_buffer_methods,
};


PyObject *mc_py_host_alloc(PyObject *mod, PyObject *args)
{
	unsigned long long size;
	void *p = NULL;

	(void)mod;
	if (!PyArg_ParseTuple(args, "K:alloc", &size))
		return NULL;
	if (size == 0 || posix_memalign(&p, 4096, size))
		return PyLong_FromLong(0);
	return PyLong_FromUnsignedLongLong((unsigned long long)(uintptr_t)p);
}

PyObject *mc_py_host_free(PyObject *mod, PyObject *args)
{
	unsigned long long ptr;

	(void)mod;
	if (!PyArg_ParseTuple(args, "K:free", &ptr))
		return NULL;
	free((void *)(uintptr_t)ptr);
	Py_RETURN_NONE;
}
