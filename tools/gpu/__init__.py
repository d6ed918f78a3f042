"""The GPU checks: one command (``python -m tools.gpu``), one shaped-model builder, one timing helper, one settings
switch (``common``); every decoder at batch 1 and in a mixed round (``rules``); the static path's sections for a
longer lease (``static``); the compiled forward (``compiled``)."""
