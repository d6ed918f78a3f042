"""The ground floor: everything about decoders that needs no torch, on which the runtime, the records, the models,
the harness and the explorer all stand.

``catalogue`` (every decoder and parameter: names, types, defaults, ranges, labels, help; configs and validation),
``cards`` (the ``Card`` each decoder folder's torch-free ``card.py`` carries, found by scanning
``engine/decoders/``: a decoder is a plug-in, and nothing here imports a policy), ``params`` (``Param``,
``Decoder``), ``spec`` (SPEC strings such as ``"s2d2:preset=sdar-a"``) and ``applies`` (which decoders a model
kind can run). Importing this package imports no torch (a test checks).
"""
