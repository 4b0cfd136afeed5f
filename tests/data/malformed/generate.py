#!/usr/bin/env python3
"""Regenerates the malformed-GGUF corpus (this directory) and the fuzzer's valid seeds.

    python3 tests/data/malformed/generate.py

Every malformed file is the small valid file below with exactly one defect, so the error it
must produce is known; MANIFEST.tsv maps each file to a substring of that error and is what
tests/test_gguf_malformed.cpp checks. The valid files go to tests/fuzz/seeds/ (the same test
asserts they load, which proves each defect, not the base, is what the reader rejects).
Files whose name starts with "fuzz-" were found by the fuzzer: they are kept as they are and
their manifest lines are preserved when this script rewrites the manifest.
Standard library only; output is deterministic.
"""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
SEEDS = os.path.join(HERE, "..", "..", "fuzz", "seeds")

# GGUF metadata value types and ggml tensor types used here.
U8, I8, U16, I16, U32, I32, F32, BOOL, STRING, ARRAY, U64, I64, F64 = range(13)
T_F32, T_F16, T_Q4_0, T_Q8_0, T_I32 = 0, 1, 2, 8, 26
TYPE_BYTES = {T_F32: (1, 4), T_F16: (1, 2), T_Q4_0: (32, 18), T_Q8_0: (32, 34), T_I32: (1, 4)}


def u32(x): return struct.pack("<I", x)
def u64(x): return struct.pack("<Q", x)
def gstr(b): return u64(len(b)) + b


def scalar(t, v):
    fmt = {U8: "B", I8: "b", U16: "H", I16: "h", U32: "I", I32: "i", F32: "f", BOOL: "B",
           U64: "Q", I64: "q", F64: "d"}[t]
    return struct.pack("<" + fmt, v)


def kv(key, t, payload):
    """One metadata record; payload is the already-encoded value."""
    return gstr(key) + u32(t) + payload


def arr(elem_type, payloads):
    return u32(elem_type) + u64(len(payloads)) + b"".join(payloads)


def info(name, dims, ttype, offset):
    return gstr(name) + u32(len(dims)) + b"".join(u64(d) for d in dims) + u32(ttype) + u64(offset)


def nbytes(dims, ttype):
    """Data bytes, capped: defect cases with absurd dims still get a small file."""
    block, size = TYPE_BYTES.get(ttype, (1, 4))
    n = 1
    for d in dims:
        n *= d
    return min(n // block * size, 1 << 12)


def pad(n, a): return (n + a - 1) // a * a


class File:
    """A GGUF file as editable parts; build() lays it out like the writer does."""

    def __init__(self, version=3, alignment=32):
        self.magic = b"GGUF"
        self.version = u32(version)
        self.alignment = alignment
        self.kvs = [
            kv(b"general.architecture", STRING, gstr(b"test")),
            kv(b"test.block_count", U32, u32(2)),
            kv(b"test.flag", BOOL, scalar(BOOL, 1)),
            kv(b"tokenizer.ggml.tokens", ARRAY, arr(STRING, [gstr(b"<s>"), gstr(b"a"), gstr(b"bc")])),
            kv(b"test.nested", ARRAY, arr(ARRAY, [arr(I32, [scalar(I32, -1), scalar(I32, 2)]), arr(F32, [])])),
        ]
        if alignment != 32:
            self.kvs.append(kv(b"general.alignment", U32, u32(alignment)))
        # (name, dims, type); offsets are laid out sequentially unless overridden.
        self.tensors = [(b"a.weight", [8], T_F32), (b"b.weight", [32, 2], T_Q8_0)]
        self.offsets = None
        self.n_tensors = None
        self.n_kv = None

    def layout(self):
        offsets, at = [], 0
        for _, dims, t in self.tensors:
            offsets.append(at)
            at += pad(nbytes(dims, t), self.alignment)
        return offsets, at

    def build(self):
        offsets, total = self.layout()
        if self.offsets is not None:
            offsets = self.offsets
        head = self.magic + self.version
        head += u64(len(self.tensors) if self.n_tensors is None else self.n_tensors)
        head += u64(len(self.kvs) if self.n_kv is None else self.n_kv)
        head += b"".join(self.kvs)
        head += b"".join(info(n, d, t, o) for (n, d, t), o in zip(self.tensors, offsets))
        self.infos_end = len(head)
        if not self.tensors:
            return head
        data = bytes((i * 7 + 3) & 0xFF for i in range(total))
        return head + b"\0" * (pad(len(head), self.alignment) - len(head)) + data


def base(): return File()


def with_kv(i, record):
    f = base()
    f.kvs[i] = record
    return f


def with_tensor(i, name=None, dims=None, ttype=None):
    f = base()
    n, d, t = f.tensors[i]
    f.tensors[i] = (n if name is None else name, d if dims is None else dims, t if ttype is None else ttype)
    return f


def cases():
    """(file name, bytes, expected error substring) for each defect."""
    ok = base().build()
    c = []

    def add(name, data, expect):
        c.append((name, data if isinstance(data, bytes) else data.build(), expect))

    # Header.
    add("empty.gguf", b"", "bad magic")
    add("short-magic.gguf", b"GG", "bad magic")
    add("bad-magic.gguf", b"GGUX" + ok[4:], "bad magic")
    add("version-1.gguf", ok[:4] + u32(1) + ok[8:], "unsupported GGUF version 1")
    add("version-4.gguf", ok[:4] + u32(4) + ok[8:], "unsupported GGUF version 4")
    add("big-endian.gguf", ok[:4] + struct.pack(">I", 3) + ok[8:], "big-endian")
    add("truncated-header.gguf", ok[:13], "truncated file while reading tensor count")
    f = base(); f.n_kv = 1 << 40
    add("huge-kv-count.gguf", f, "absurd metadata count")
    f = base(); f.n_tensors = 1 << 40
    add("huge-tensor-count.gguf", f, "absurd tensor count")
    f = base(); f.tensors = []; f.n_kv = 6
    add("kv-count-too-high.gguf", f, "truncated file while reading metadata key")

    # Metadata.
    add("truncated-metadata.gguf", ok[:160], "truncated file while reading array length")
    add("key-length-beyond-file.gguf", ok[:24] + u64(4096) + ok[32:120], "metadata key has length 4096 beyond")
    add("huge-string-length.gguf", with_kv(0, gstr(b"general.architecture") + u32(STRING) + u64(1 << 63) + b"test"),
        "string value of key 'general.architecture' has length 9223372036854775808 beyond")
    add("huge-array-count.gguf", with_kv(3, kv(b"tokenizer.ggml.tokens", ARRAY, u32(U64) + u64(1 << 61))),
        "absurd array length of key 'tokenizer.ggml.tokens'")
    add("string-array-count-beyond-file.gguf",
        with_kv(3, kv(b"tokenizer.ggml.tokens", ARRAY, u32(STRING) + u64(100000) + gstr(b"x"))),
        "absurd array length of key 'tokenizer.ggml.tokens'")
    bomb = u32(ARRAY) + u64(1)
    add("nested-array-depth-bomb.gguf", with_kv(4, kv(b"test.nested", ARRAY, bomb * 200 + u32(U8) + u64(0))),
        "metadata key 'test.nested' nests arrays deeper than 8")
    add("bad-bool.gguf", with_kv(2, kv(b"test.flag", BOOL, b"\x02")), "metadata key 'test.flag' has invalid bool byte 2")
    add("bad-bool-in-array.gguf", with_kv(2, kv(b"test.flag", ARRAY, arr(BOOL, [b"\x01", b"\xff"]))),
        "invalid bool byte 255")
    add("unknown-value-type.gguf", with_kv(1, gstr(b"test.block_count") + u32(13) + u32(2)),
        "metadata key 'test.block_count' has value type 13 (unknown)")
    add("unknown-array-element-type.gguf", with_kv(3, kv(b"tokenizer.ggml.tokens", ARRAY, u32(99) + u64(0))),
        "has array element type 99 (unknown)")
    add("duplicate-key.gguf", with_kv(2, kv(b"test.block_count", U32, u32(3))),
        "duplicate metadata key 'test.block_count'")
    f = base(); f.kvs[1:1] = [kv(b"evil\nkey", U8, b"\x01")] * 2
    add("duplicate-key-control-chars.gguf", f, "duplicate metadata key 'evil\\x0akey'")
    add("empty-key.gguf", with_kv(1, kv(b"", U32, u32(2))), "empty metadata key")
    add("alignment-not-power-of-two.gguf", with_kv(1, kv(b"general.alignment", U32, u32(48))),
        "general.alignment 48 is not a power of two")
    add("alignment-zero.gguf", with_kv(1, kv(b"general.alignment", U32, u32(0))),
        "general.alignment 0 is not a power of two")
    add("alignment-wrong-type.gguf", with_kv(1, kv(b"general.alignment", U64, u64(32))),
        "general.alignment is u64, expected u32")

    # Tensor infos.
    f = base(); f.build()
    add("truncated-tensor-info.gguf", ok[:f.infos_end - 10], "truncated file while reading tensor")
    f = base(); f.tensors = []; f.n_tensors = 1
    add("tensor-name-length-beyond-file.gguf", f.build() + u64(1 << 20) + b"abc", "tensor name has length 1048576 beyond")
    add("empty-tensor-name.gguf", with_tensor(0, name=b""), "tensor with an empty name")
    add("unknown-ggml-type.gguf", with_tensor(0, ttype=99), "tensor 'a.weight' has unknown ggml type 99")
    add("removed-ggml-type-q4_2.gguf", with_tensor(0, ttype=4), "unknown ggml type 4")
    add("too-many-dims.gguf", with_tensor(0, dims=[2, 2, 1, 1, 2]), "tensor 'a.weight' has 5 dimensions")
    add("zero-dims.gguf", with_tensor(0, dims=[]), "tensor 'a.weight' has 0 dimensions")
    add("zero-dimension.gguf", with_tensor(0, dims=[8, 0]), "tensor 'a.weight' has invalid dimension 1 = 0")
    add("negative-dimension.gguf", with_tensor(0, dims=[(1 << 64) - 8]), "has invalid dimension 0 = 18446744073709551608")
    add("dims-product-overflow.gguf", with_tensor(0, dims=[1 << 32, 1 << 32]), "element count overflows")
    add("dims-product-overflow-4d.gguf", with_tensor(0, dims=[1 << 16, 1 << 16, 1 << 16, 1 << 16]),
        "element count overflows")
    add("byte-size-overflow.gguf", with_tensor(0, dims=[1 << 31, 1 << 31]), "byte size overflows")
    add("row-not-block-multiple.gguf", with_tensor(1, dims=[31, 2]),
        "tensor 'b.weight' row of 31 elements is not a multiple of q8_0's block size 32")
    add("duplicate-tensor-name.gguf", with_tensor(1, name=b"a.weight"), "duplicate tensor name 'a.weight'")

    # Tensor data.
    f = base(); f.offsets = [0, 36]
    add("misaligned-offset.gguf", f, "tensor 'b.weight' data offset 36 is not aligned to 32")
    f = base(); f.kvs.append(kv(b"general.alignment", U32, u32(64)))
    add("misaligned-for-custom-alignment.gguf", f, "data offset 32 is not aligned to 64")
    f = base(); f.offsets = [0, 1 << 20]
    add("data-out-of-bounds.gguf", f, "tensor 'b.weight' data (offset 1048576, 68 bytes) lies beyond the end")
    f = base(); f.offsets = [0, (1 << 64) - 32]
    add("offset-overflow.gguf", f, "lies beyond the end of the file")
    f = base(); f.offsets = [0, 0]
    add("overlapping-tensors.gguf", f, "tensor 'b.weight' data overlaps tensor 'a.weight'")
    f = base(); f.tensors[1] = (b"b.weight", [16], T_F32); f.offsets = [32, 0]
    add("overlapping-tensors-unsorted.gguf", f, "tensor 'a.weight' data overlaps tensor 'b.weight'")
    add("truncated-data.gguf", ok[:-40], "tensor 'b.weight' data (offset 32, 68 bytes) lies beyond the end")

    # v2 files get the same checks.
    f = base(); f.version = u32(2)
    add("v2-truncated.gguf", f.build()[:-40], "lies beyond the end of the file")
    return c


def seeds():
    yield "valid-v3.gguf", base().build()
    f = base(); f.version = u32(2)
    yield "valid-v2.gguf", f.build()
    yield "valid-align64.gguf", File(alignment=64).build()
    f = base(); f.tensors = []
    yield "valid-no-tensors.gguf", f.build()
    f = base(); f.tensors = [(b"q", [64, 3], T_Q4_0), (b"h", [5, 3, 2], T_F16), (b"i", [1, 1, 1, 7], T_I32)]
    yield "valid-types.gguf", f.build()


def main():
    manifest = os.path.join(HERE, "MANIFEST.tsv")
    kept = []  # fuzzer-found entries: not generated, carried over
    if os.path.exists(manifest):
        with open(manifest) as m:
            kept = [line for line in m if line.startswith("fuzz-")]
    for name in os.listdir(HERE):
        if name.endswith(".gguf") and not name.startswith("fuzz-"):
            os.remove(os.path.join(HERE, name))
    lines = []
    for name, data, expect in cases():
        assert "\t" not in expect and "\n" not in expect
        with open(os.path.join(HERE, name), "wb") as out:
            out.write(data)
        lines.append(f"{name}\t{expect}\n")
    with open(manifest, "w") as m:
        m.write("# file<TAB>substring its error must contain (generated by generate.py; fuzz-* lines kept)\n")
        m.writelines(lines + kept)
    os.makedirs(SEEDS, exist_ok=True)
    for name, data in seeds():
        with open(os.path.join(SEEDS, name), "wb") as out:
            out.write(data)
    print(f"{len(lines)} malformed files (+{len(kept)} fuzz-found kept), seeds in {os.path.normpath(SEEDS)}")


if __name__ == "__main__":
    main()
