"""Stub: the output class verl's mcore utilities import (unused by the data path)."""


class CausalLMOutputForPPO:
    pass
