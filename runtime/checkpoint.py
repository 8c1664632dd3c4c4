"""public import path of runtime.training.checkpoint"""

from .training.checkpoint import (
    STATE_TAGS,
    TRAINING_TAG,
    canonical_nan_bits,
    decode_array,
    decode_list,
    encode_array,
    load_state,
    read_json,
    save_state,
    state_from_json,
    write_bytes_atomic,
)

__all__ = [
    "STATE_TAGS",
    "TRAINING_TAG",
    "canonical_nan_bits",
    "decode_array",
    "decode_list",
    "encode_array",
    "load_state",
    "read_json",
    "save_state",
    "state_from_json",
    "write_bytes_atomic",
]
