"""Records: what a decode leaves behind. One typed ``StepRecord`` per forward and the run's ``TraceMeta``
(``trace``, ``trace_meta``), saved as npz + JSON and never unpickled."""
