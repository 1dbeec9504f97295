# SPDX-License-Identifier: Apache-2.0
"""A small MessagePack codec for the structured object store's msgpack_ragged rows.

Encoding follows what msgpack-python writes with use_bin_type=True and strict_types=True, so
rows encoded here are byte-identical to upstream's: the shortest integer form, float64 for
floats, str8/16/32 for text and bin8/16/32 for bytes, exact types only (a tuple, a bool
subclass or a numpy scalar is a TypeError).  Decoding is what Unpacker(raw=False) returns:
str for text, bytes for binary, list for arrays, dict for maps whose keys are str or bytes.
Nothing else is decoded: extension types are a ValueError, and so are truncated input and
nesting deeper than NEST_LIMIT.  Pure Python; no state.
"""
import struct

NEST_LIMIT = 511

_PACK_U8, _PACK_U16, _PACK_U32, _PACK_U64 = (struct.Struct(">B"), struct.Struct(">H"),
                                             struct.Struct(">I"), struct.Struct(">Q"))
_PACK_I8, _PACK_I16, _PACK_I32, _PACK_I64 = (struct.Struct(">b"), struct.Struct(">h"),
                                             struct.Struct(">i"), struct.Struct(">q"))
_PACK_F32, _PACK_F64 = struct.Struct(">f"), struct.Struct(">d")


def _pack_int(v, out):
    if 0 <= v < 0x80:
        out.append(v)
    elif -32 <= v < 0:
        out.append(v & 0xff)
    elif v >= 0:
        if v <= 0xff:
            out += b"\xcc" + _PACK_U8.pack(v)
        elif v <= 0xffff:
            out += b"\xcd" + _PACK_U16.pack(v)
        elif v <= 0xffffffff:
            out += b"\xce" + _PACK_U32.pack(v)
        elif v <= 0xffffffffffffffff:
            out += b"\xcf" + _PACK_U64.pack(v)
        else:
            raise OverflowError("Integer value out of range")
    elif v >= -0x80:
        out += b"\xd0" + _PACK_I8.pack(v)
    elif v >= -0x8000:
        out += b"\xd1" + _PACK_I16.pack(v)
    elif v >= -0x80000000:
        out += b"\xd2" + _PACK_I32.pack(v)
    elif v >= -0x8000000000000000:
        out += b"\xd3" + _PACK_I64.pack(v)
    else:
        raise OverflowError("Integer value out of range")


def _pack_len(n, fix_base, fix_max, codes, out, what):
    """A length header: fix form below fix_max (when fix_base is set), else 8/16/32-bit forms
    from codes (None where that width does not exist)."""
    if fix_base is not None and n < fix_max:
        out.append(fix_base | n)
    elif codes[0] is not None and n <= 0xff:
        out += codes[0] + _PACK_U8.pack(n)
    elif n <= 0xffff:
        out += codes[1] + _PACK_U16.pack(n)
    elif n <= 0xffffffff:
        out += codes[2] + _PACK_U32.pack(n)
    else:
        raise ValueError("%s is too large" % what)


def _pack(obj, out, depth):
    if depth < 0:
        raise ValueError("recursion limit exceeded.")
    t = type(obj)
    if obj is None:
        out.append(0xc0)
    elif t is bool:
        out.append(0xc3 if obj else 0xc2)
    elif t is int:
        _pack_int(obj, out)
    elif t is float:
        out += b"\xcb" + _PACK_F64.pack(obj)
    elif t is str:
        data = obj.encode("utf-8", "surrogatepass")
        _pack_len(len(data), 0xa0, 32, (b"\xd9", b"\xda", b"\xdb"), out, "String")
        out += data
    elif t is bytes or t is bytearray or t is memoryview:
        data = bytes(obj) if t is not memoryview else obj.tobytes()
        _pack_len(len(data), None, 0, (b"\xc4", b"\xc5", b"\xc6"), out, "Bytes")
        out += data
    elif t is list:
        _pack_len(len(obj), 0x90, 16, (None, b"\xdc", b"\xdd"), out, "list")
        for item in obj:
            _pack(item, out, depth - 1)
    elif t is dict:
        _pack_len(len(obj), 0x80, 16, (None, b"\xde", b"\xdf"), out, "dict")
        for k, v in obj.items():
            _pack(k, out, depth - 1)
            _pack(v, out, depth - 1)
    else:
        raise TypeError("can not serialize %r object" % t.__name__)


def packb(obj):
    """obj as MessagePack bytes; TypeError for a type outside the exact set above,
    OverflowError for an integer outside [-2**63, 2**64)."""
    out = bytearray()
    _pack(obj, out, NEST_LIMIT)
    return bytes(out)


class _Reader:
    __slots__ = ("data", "pos")

    def __init__(self, data):
        self.data, self.pos = data, 0

    def take(self, n):
        end = self.pos + n
        if end > len(self.data):
            raise ValueError("msgpack data is truncated")
        chunk = self.data[self.pos:end]
        self.pos = end
        return chunk

    def unpack(self, st):
        return st.unpack(self.take(st.size))[0]


_FIXED = {0xcc: _PACK_U8, 0xcd: _PACK_U16, 0xce: _PACK_U32, 0xcf: _PACK_U64,
          0xd0: _PACK_I8, 0xd1: _PACK_I16, 0xd2: _PACK_I32, 0xd3: _PACK_I64,
          0xca: _PACK_F32, 0xcb: _PACK_F64}
_STR_LEN = {0xd9: _PACK_U8, 0xda: _PACK_U16, 0xdb: _PACK_U32}
_BIN_LEN = {0xc4: _PACK_U8, 0xc5: _PACK_U16, 0xc6: _PACK_U32}


def _unpack(r, depth):
    if depth < 0:
        raise ValueError("msgpack data nests too deeply")
    b = r.take(1)[0]
    if b < 0x80:
        return b
    if b >= 0xe0:
        return b - 0x100
    if 0xa0 <= b <= 0xbf:
        return bytes(r.take(b & 0x1f)).decode("utf-8")
    if 0x90 <= b <= 0x9f:
        return [_unpack(r, depth - 1) for _ in range(b & 0x0f)]
    if 0x80 <= b <= 0x8f:
        return _unpack_map(r, b & 0x0f, depth)
    if b == 0xc0:
        return None
    if b in (0xc2, 0xc3):
        return b == 0xc3
    if b in _FIXED:
        return r.unpack(_FIXED[b])
    if b in _STR_LEN:
        return bytes(r.take(r.unpack(_STR_LEN[b]))).decode("utf-8")
    if b in _BIN_LEN:
        return bytes(r.take(r.unpack(_BIN_LEN[b])))
    if b in (0xdc, 0xdd):
        n = r.unpack(_PACK_U16 if b == 0xdc else _PACK_U32)
        if n > len(r.data) - r.pos:
            raise ValueError("msgpack array is longer than its data")
        return [_unpack(r, depth - 1) for _ in range(n)]
    if b in (0xde, 0xdf):
        return _unpack_map(r, r.unpack(_PACK_U16 if b == 0xde else _PACK_U32), depth)
    raise ValueError("msgpack type 0x%02x is not supported here" % b)


def _unpack_map(r, n, depth):
    if 2 * n > len(r.data) - r.pos:
        raise ValueError("msgpack map is longer than its data")
    out = {}
    for _ in range(n):
        k = _unpack(r, depth - 1)
        if type(k) not in (str, bytes):
            raise ValueError("%s is not allowed for map key" % type(k).__name__)
        out[k] = _unpack(r, depth - 1)
    return out


def unpack_all(data):
    """Every object packed back to back in data, in order (ValueError on malformed data)."""
    r = _Reader(memoryview(bytes(data)) if not isinstance(data, bytes) else memoryview(data))
    out = []
    while r.pos < len(r.data):
        out.append(_unpack(r, NEST_LIMIT))
    return out
