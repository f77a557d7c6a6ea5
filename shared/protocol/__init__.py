"""Wire protocol of the mesh: typed messages, the envelope, and the one module of subject names.

    from shared.protocol import messages as m, subjects
    from shared.protocol.envelope import Publisher, decode
"""

from shared.protocol.envelope import (
    SCHEMA_VERSION,
    Decoded,
    Envelope,
    Publisher,
    SequenceTracker,
    SeqVerdict,
    decode,
    encode,
    make_publisher_id,
)
from shared.protocol.errors import ErrorCode, ProtocolError

__all__ = [
    "SCHEMA_VERSION", "Decoded", "Envelope", "ErrorCode", "ProtocolError", "Publisher", "SeqVerdict",
    "SequenceTracker", "decode", "encode", "make_publisher_id",
]
