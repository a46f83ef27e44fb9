/* torchmem._gcscan: sort a list of objects into buckets by their exact class, in C.
 *
 * The live-tensor census must look at the class of every gc-tracked object (hundreds
 * of thousands in a process that imported torch). Python-level passes cost ~100 ns an
 * object; this loop costs a few, because it skips objects of static (C) classes, which
 * are most gc objects (dicts, lists, tuples, functions, cells, code...) and cannot be
 * tensors, modules or optimizers, before any lookup.
 *
 * classify(objects, codes, n) -> list of n lists
 *     objects: a list; codes: a dict {class: bucket index in range(n)}. An object whose
 *     exact class is in codes is appended to that bucket; other objects are skipped.
 *     Objects of static classes are always skipped, so codes must map heap classes only
 *     (classes defined in Python, as torch.Tensor and every nn.Module subclass are).
 *
 * Only the stable C API is used. The module holds no reference after it returns.
 * torchmem works without it (torchmem.collect.live has the same pass in Python).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

static PyObject *
classify(PyObject *self, PyObject *args)
{
    PyObject *objects, *codes;
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "O!O!n:classify", &PyList_Type, &objects, &PyDict_Type,
                          &codes, &n)) {
        return NULL;
    }
    if (n < 0) {
        PyErr_SetString(PyExc_ValueError, "classify: n must be >= 0");
        return NULL;
    }
    PyObject *out = PyList_New(n);
    if (out == NULL) {
        return NULL;
    }
    for (Py_ssize_t j = 0; j < n; j++) {
        PyObject *bucket = PyList_New(0);
        if (bucket == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, j, bucket);
    }
    /* the list may not change size under us: nothing below runs Python code except
       dict lookups keyed by classes, whose hash and equality are identity */
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(objects); i++) {
        PyObject *obj = PyList_GET_ITEM(objects, i);
        PyTypeObject *cls = Py_TYPE(obj);
        if (!PyType_HasFeature(cls, Py_TPFLAGS_HEAPTYPE)) {
            continue;
        }
        PyObject *code = PyDict_GetItemWithError(codes, (PyObject *)cls); /* borrowed */
        if (code == NULL) {
            if (PyErr_Occurred()) {
                Py_DECREF(out);
                return NULL;
            }
            continue;
        }
        Py_ssize_t k = PyLong_AsSsize_t(code);
        if (k == -1 && PyErr_Occurred()) {
            Py_DECREF(out);
            return NULL;
        }
        if (k < 0 || k >= n) {
            PyErr_Format(PyExc_ValueError, "classify: bucket %zd is not in range(%zd)", k, n);
            Py_DECREF(out);
            return NULL;
        }
        if (PyList_Append(PyList_GET_ITEM(out, k), obj) < 0) {
            Py_DECREF(out);
            return NULL;
        }
    }
    return out;
}

static PyMethodDef methods[] = {
    {"classify", classify, METH_VARARGS,
     "classify(objects, codes, n) -> list of n lists: objects bucketed by exact class."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "torchmem._gcscan",
    "Bucket objects by their exact class, in C (see torchmem.collect.live).", -1, methods,
};

PyMODINIT_FUNC
PyInit__gcscan(void)
{
    return PyModule_Create(&module);
}
