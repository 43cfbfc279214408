"""The layout of the buffers that cross between client and server, for code
that reads or builds them outside the library (the evaluation's faiss
server, tests).  It mirrors wire.h, the one C module that knows the layout;
python/tests/test_wire.py checks every constant here against the library's
size functions (mess_upload_size, mess_delete_size, mess_request_size,
mess_response_size), so a change to wire.h that is not made here fails.

    request  header | owner tag | request id | M x u16 budget | M x code
    response header | request id | per shard: u16 count | count x entry
    upload   header | owner tag | u64 n | n x (u32 shard | label | code | entry)
    delete   header | owner tag | u64 n | n x (u32 shard | label)
    partial  header | request id | u32 k | k x (u32 shard | u16 count | count x entry)
             (a shard subset's answer, shards increasing; mess_response_merge
             joins the partials of one request into its response)

header = magic[4] | u32 version | parameter fingerprint[16]; code =
kappa/8 bytes; entry = Params.payload_size() bytes; all little-endian.
"""
import struct

import numpy as np

VERSION = 3
MAGIC_BYTES = 4
HEADER_BYTES = 24
OWNER_BYTES = 16
REQUEST_ID_BYTES = 16
COUNT_BYTES = 8          # u64 record count of upload and delete
BUDGET_BYTES = 2         # u16 budget of a request, count of a response
SHARD_BYTES = 4          # u32 shard of a record
LABEL_BYTES = 16
MAGIC = {"upload": b"MSUP", "delete": b"MSDL", "request": b"MSRQ",
         "response": b"MSRS", "partial": b"MSRP"}

CLIENT_BODY_OFFSET = HEADER_BYTES + OWNER_BYTES
RECORDS_OFFSET = CLIENT_BODY_OFFSET + COUNT_BYTES
REQUEST_ID_OFFSET = CLIENT_BODY_OFFSET
REQUEST_BUDGETS_OFFSET = REQUEST_ID_OFFSET + REQUEST_ID_BYTES
RESPONSE_BODY_OFFSET = HEADER_BYTES + REQUEST_ID_BYTES
PARTIAL_SECTIONS_OFFSET = RESPONSE_BODY_OFFSET   # u32 section count
PARTIAL_BODY_OFFSET = PARTIAL_SECTIONS_OFFSET + 4
SECTION_BYTES = SHARD_BYTES + BUDGET_BYTES        # u32 shard | u16 count
LABEL_OFFSET = SHARD_BYTES
CODE_OFFSET = LABEL_OFFSET + LABEL_BYTES
DELETE_RECORD_BYTES = CODE_OFFSET


def code_bytes(params):
    return params.kappa // 8


def upload_record_bytes(params):
    return CODE_OFFSET + code_bytes(params) + params.payload_size()


def request_codes_offset(params):
    return REQUEST_BUDGETS_OFFSET + params.shards * BUDGET_BYTES


def parse_request(req, shards, code_bytes):
    """(header bytes, request id, budgets uint16 (M,), codes uint8
    (M, code_bytes)) of a request buffer; the owner tag is skipped."""
    b = bytes(req)
    hdr = b[:HEADER_BYTES]
    rid = b[REQUEST_ID_OFFSET:REQUEST_ID_OFFSET + REQUEST_ID_BYTES]
    budgets = np.frombuffer(b, dtype="<u2", count=shards, offset=REQUEST_BUDGETS_OFFSET)
    codes = np.frombuffer(b, dtype=np.uint8, count=shards * code_bytes,
                          offset=REQUEST_BUDGETS_OFFSET + BUDGET_BYTES * shards)
    return hdr, rid, budgets, codes.reshape(shards, code_bytes)


def build_response(request_header, request_id, per_shard_entries):
    """A response to a request whose header is request_header: the response
    magic, the request's version and fingerprint, its id, then per shard a
    count and the entries (uint8 arrays (count, entry bytes))."""
    parts = [MAGIC["response"], bytes(request_header[MAGIC_BYTES:HEADER_BYTES]),
             bytes(request_id)]
    for e in per_shard_entries:
        parts.append(struct.pack("<H", len(e)))
        parts.append(np.ascontiguousarray(e).tobytes())
    return b"".join(parts)


def response_entries(resp, shards, entry_bytes):
    """Per shard, the list of entry byte strings of a response (the header
    is not checked)."""
    b = bytes(resp)
    off, out = RESPONSE_BODY_OFFSET, []
    for _ in range(shards):
        cnt = struct.unpack_from("<H", b, off)[0]
        off += BUDGET_BYTES
        out.append([b[off + e * entry_bytes: off + (e + 1) * entry_bytes] for e in range(cnt)])
        off += cnt * entry_bytes
    return out


def partial_sections(part, entry_bytes):
    """[(shard, [entry bytes...]), ...] of a partial response (the header is
    not checked; a cut-short part raises struct.error or ValueError)."""
    b = bytes(part)
    k = struct.unpack_from("<I", b, PARTIAL_SECTIONS_OFFSET)[0]
    off, out = PARTIAL_BODY_OFFSET, []
    for _ in range(k):
        shard, cnt = struct.unpack_from("<IH", b, off)
        off += SECTION_BYTES
        if off + cnt * entry_bytes > len(b):
            raise ValueError("partial response cut short")
        out.append((shard, [b[off + e * entry_bytes: off + (e + 1) * entry_bytes]
                            for e in range(cnt)]))
        off += cnt * entry_bytes
    return out


def build_partial(request_header, request_id, sections):
    """A partial response: sections = [(shard, entries uint8 (count, entry
    bytes) or list of bytes), ...] in the order given (tests use it to build
    hostile parts)."""
    parts = [MAGIC["partial"], bytes(request_header[MAGIC_BYTES:HEADER_BYTES]),
             bytes(request_id), struct.pack("<I", len(sections))]
    for shard, e in sections:
        if isinstance(e, list):
            parts.append(struct.pack("<IH", shard, len(e)))
            parts.extend(bytes(x) for x in e)
        else:
            parts.append(struct.pack("<IH", shard, len(e)))
            parts.append(np.ascontiguousarray(e).tobytes())
    return b"".join(parts)
