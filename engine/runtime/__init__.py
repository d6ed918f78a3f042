"""The runtime: one decode is a ``Generation`` (``loop``) that drives a decoder's policy block by block over a
``Runner`` (``runner``: the canvas, its cache and its forwards, one class per model kind); every decode's forward
requests go through one scheduler (``scheduler``), which batches them (``batch``, ``ragged``) and computes their
token statistics together (``sampling``). ``masks`` and ``cache`` build the attention and the K/V; ``branch``
decodes on from a step of a stored run; ``resources`` loads what a decoder needs besides the model (a drafter)."""
