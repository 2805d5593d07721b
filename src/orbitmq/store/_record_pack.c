/* orbitmq.store._record_pack: a batch's records written into a commit-log segment in one call.
 *
 * The compiled half of batch_put.py's pack_records; batch_put.py holds the pure-Python version,
 * which writes the same bytes and answers the same (tests/unit/store/test_record_pack.py runs
 * both). Nothing about the record layout is decided here: the caller passes the fixed part of
 * the batch's first record as a template (every field the records share already packed), and
 * each record is that template with five fields patched, then the body, the topic and the
 * property string:
 *
 *     0  TOTALSIZE   8  BODYCRC   16  FLAG   20  QUEUEOFFSET   28  PHYSICALOFFSET
 *     len(template) - 4  BODYLEN
 *
 * pack_records(buffer, position, template, base_offset, queue_offset, step, flags, bodies,
 *              topic_head, properties) -> (end_position, commit_log_offsets, sizes)
 *   buffer       a writable buffer (the mapped segment)
 *   topic_head   TOPICLEN + topic
 *   properties   list[bytes], each record's final property string (PROPERTIESLEN is written here)
 *   step         1: records take consecutive queue offsets from queue_offset; 0: all take it
 * BODYCRC is zlib.crc32(body) & 0x7FFFFFFF, computed by the zlib module itself.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define PATCHED_PREFIX 36 /* TOTALSIZE .. PHYSICALOFFSET */

static PyObject *crc32_function; /* zlib.crc32 */

static void
put_int(unsigned char *p, uint32_t value)
{
    p[0] = (unsigned char)(value >> 24);
    p[1] = (unsigned char)(value >> 16);
    p[2] = (unsigned char)(value >> 8);
    p[3] = (unsigned char)value;
}

static void
put_long(unsigned char *p, uint64_t value)
{
    put_int(p, (uint32_t)(value >> 32));
    put_int(p + 4, (uint32_t)value);
}

static PyObject *
pack_records(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 10) {
        PyErr_SetString(PyExc_TypeError, "pack_records takes ten arguments");
        return NULL;
    }
    Py_ssize_t position = PyLong_AsSsize_t(args[1]);
    long long base_offset = PyLong_AsLongLong(args[3]);
    long long queue_offset = PyLong_AsLongLong(args[4]);
    long step = PyLong_AsLong(args[5]);
    if (PyErr_Occurred()) {
        return NULL;
    }
    PyObject *template = args[2], *flags = args[6], *bodies = args[7], *topic_head = args[8],
             *properties = args[9];
    if (!PyBytes_Check(template) || !PyBytes_Check(topic_head) || !PyList_Check(flags)
        || !PyList_Check(bodies) || !PyList_Check(properties)) {
        PyErr_SetString(PyExc_TypeError,
                        "pack_records: template and topic_head are bytes; flags, bodies, properties lists");
        return NULL;
    }
    Py_ssize_t count = PyList_GET_SIZE(bodies);
    if (PyList_GET_SIZE(flags) != count || PyList_GET_SIZE(properties) != count) {
        PyErr_SetString(PyExc_ValueError, "pack_records: flags, bodies and properties differ in length");
        return NULL;
    }
    Py_ssize_t fixed_size = PyBytes_GET_SIZE(template);
    Py_ssize_t topic_size = PyBytes_GET_SIZE(topic_head);
    if (fixed_size < PATCHED_PREFIX + 4 || (step != 0 && step != 1) || position < 0) {
        PyErr_SetString(PyExc_ValueError, "pack_records: bad template, step or position");
        return NULL;
    }

    /* Every size checked, and the total measured, before a byte is written. */
    Py_ssize_t total = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *body = PyList_GET_ITEM(bodies, i), *text = PyList_GET_ITEM(properties, i);
        if (!PyBytes_Check(body) || !PyBytes_Check(text)) {
            PyErr_SetString(PyExc_TypeError, "pack_records: bodies and properties must be bytes");
            return NULL;
        }
        if (PyBytes_GET_SIZE(text) > 32767) {
            PyErr_SetString(PyExc_ValueError, "pack_records: a property string exceeds 32767 bytes");
            return NULL;
        }
        Py_ssize_t size = fixed_size + PyBytes_GET_SIZE(body) + topic_size + 2 + PyBytes_GET_SIZE(text);
        if (size > INT32_MAX) {
            PyErr_SetString(PyExc_ValueError, "pack_records: a record exceeds 2 GiB");
            return NULL;
        }
        total += size;
    }

    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_WRITABLE) < 0) {
        return NULL;
    }
    PyObject *offsets = NULL, *sizes = NULL, *result = NULL;
    if (position > view.len || total > view.len - position) {
        PyErr_Format(PyExc_ValueError, "pack_records: %zd bytes at %zd do not fit a buffer of %zd",
                     total, position, view.len);
        goto done;
    }
    offsets = PyList_New(count);
    sizes = PyList_New(count);
    if (offsets == NULL || sizes == NULL) {
        goto done;
    }
    unsigned char *out = (unsigned char *)view.buf;
    const unsigned char *fixed = (const unsigned char *)PyBytes_AS_STRING(template);
    const char *topic = PyBytes_AS_STRING(topic_head);
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *body = PyList_GET_ITEM(bodies, i), *text = PyList_GET_ITEM(properties, i);
        Py_ssize_t body_size = PyBytes_GET_SIZE(body), text_size = PyBytes_GET_SIZE(text);
        Py_ssize_t size = fixed_size + body_size + topic_size + 2 + text_size;
        long flag = PyLong_AsLong(PyList_GET_ITEM(flags, i));
        if (flag == -1 && PyErr_Occurred()) {
            goto done;
        }
        if (flag < INT32_MIN || flag > INT32_MAX) {
            PyErr_SetString(PyExc_OverflowError, "pack_records: a flag does not fit an int");
            goto done;
        }
        PyObject *crc_object = PyObject_CallOneArg(crc32_function, body);
        if (crc_object == NULL) {
            goto done;
        }
        unsigned long crc = PyLong_AsUnsignedLong(crc_object);
        Py_DECREF(crc_object);
        if (crc == (unsigned long)-1 && PyErr_Occurred()) {
            goto done;
        }
        long long commit_log_offset = base_offset + position;
        PyObject *item = PyLong_FromLongLong(commit_log_offset);
        if (item == NULL) {
            goto done;
        }
        PyList_SET_ITEM(offsets, i, item);
        item = PyLong_FromSsize_t(size);
        if (item == NULL) {
            goto done;
        }
        PyList_SET_ITEM(sizes, i, item);

        unsigned char *record = out + position;
        memcpy(record, fixed, (size_t)fixed_size);
        put_int(record, (uint32_t)size);
        put_int(record + 8, (uint32_t)(crc & 0x7FFFFFFFUL));
        put_int(record + 16, (uint32_t)(int32_t)flag);
        put_long(record + 20, (uint64_t)(step ? queue_offset : 0));
        put_long(record + 28, (uint64_t)commit_log_offset);
        put_int(record + fixed_size - 4, (uint32_t)body_size);
        unsigned char *cursor = record + fixed_size;
        memcpy(cursor, PyBytes_AS_STRING(body), (size_t)body_size);
        cursor += body_size;
        memcpy(cursor, topic, (size_t)topic_size);
        cursor += topic_size;
        cursor[0] = (unsigned char)(text_size >> 8);
        cursor[1] = (unsigned char)text_size;
        memcpy(cursor + 2, PyBytes_AS_STRING(text), (size_t)text_size);
        position += size;
        queue_offset += step;
    }
    result = Py_BuildValue("(nOO)", position, offsets, sizes);

done:
    PyBuffer_Release(&view);
    Py_XDECREF(offsets);
    Py_XDECREF(sizes);
    return result;
}

static PyMethodDef methods[] = {
    {"pack_records", (PyCFunction)(void (*)(void))pack_records, METH_FASTCALL,
     "pack_records(buffer, position, template, base_offset, queue_offset, step, flags, bodies, "
     "topic_head, properties) -> (end_position, commit_log_offsets, sizes); see batch_put.py."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    "orbitmq.store._record_pack",
    "A batch's records written into a commit-log segment in one call (the compiled half of batch_put.py).",
    -1,
    methods,
    NULL,
    NULL,
    NULL,
    NULL,
};

PyMODINIT_FUNC
PyInit__record_pack(void)
{
    if (crc32_function == NULL) {
        PyObject *zlib = PyImport_ImportModule("zlib");
        if (zlib == NULL) {
            return NULL;
        }
        crc32_function = PyObject_GetAttrString(zlib, "crc32");
        Py_DECREF(zlib);
        if (crc32_function == NULL) {
            return NULL;
        }
    }
    return PyModule_Create(&module_def);
}
