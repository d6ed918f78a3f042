"""The runtime: one decode is a ``Generation`` (``loop``) that drives a decoder's policy block by block over a
``Runner`` (``runner``: the canvas, its cache and its forwards, one class per model kind); every decode's forward
requests go through one scheduler (``scheduler``), which batches them (``batch``, over the model's ragged
layout) and computes their token statistics together (``sampling``). ``cache`` keeps the K/V; ``branch`` resumes
from a step of a stored run (its decode is built by ``engine.harness.service.branch_generation``); ``resources`` loads what a decoder needs besides the model (a drafter)."""
