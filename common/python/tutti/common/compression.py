"""The framework-neutral half of Horovod's `hvd.Compression`: the compressor interface and
the identity compressor. Each plugin adds the casts its tensors need (e.g. float16)."""


class Compressor:
    """Turns a tensor into what is sent (`compress`) and the result back (`decompress`)."""

    @staticmethod
    def compress(tensor):
        """Returns (tensor to send, context that decompress needs)."""
        raise NotImplementedError

    @staticmethod
    def decompress(tensor, ctx):
        """Returns the received tensor in its original form."""
        raise NotImplementedError


class NoneCompressor(Compressor):
    """Sends tensors unchanged."""

    @staticmethod
    def compress(tensor):
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return tensor
