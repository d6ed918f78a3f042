"""A session's copy of each component's configuration, made when an event touches the component, not for every
component when the session's first event arrives.

gradio (6.x) builds, for every new session, the configuration of each of the page's ~300 components
(``SessionState.config_values``) on the server's event loop while it queues the session's first event: ~18 ms a
session on a quiet machine and several times that under load, a third of the server's CPU when twelve new visitors
call at once (py-spy, docs/results.md), and each queued behind the others. gradio's own preprocessing makes the
entry of every input an event carries when it is missing; only deep links read all of them (``components``; this
page offers none). ``LazySessionState`` starts empty and fills the rest when ``components`` is read; everything
else is gradio's own ``SessionState``."""

from __future__ import annotations

from gradio.state_holder import SessionState, StateHolder


class _NothingToCopy:
    """What ``SessionState.__init__`` reads of the Blocks, with no component to configure yet."""

    def __init__(self, blocks):
        self.default_config, self.blocks = blocks.default_config, {}


class LazySessionState(SessionState):
    """gradio's session state with ``config_values`` filled per component as events touch it (gradio's own
    preprocessing makes the entry of each input it sees) and whole only when ``components`` is read."""

    def __init__(self, blocks):
        self._page_ids = blocks.blocks
        super().__init__(_NothingToCopy(blocks))            # gradio's own fields; config_values starts empty

    @property
    def components(self):
        for k, v in self.blocks_config.blocks.items():   # the entries gradio would have made at the start
            if k in self._page_ids and k not in self.config_values:
                self.config_values[k] = self.blocks_config.config_for_block(k, [], v)
        return super().components


class LazyStateHolder(StateHolder):
    def __getitem__(self, session_id: str) -> SessionState:
        if session_id not in self.session_data:
            self.session_data[session_id] = LazySessionState(self.blocks)
        return super().__getitem__(session_id)


def install(app) -> None:
    """Give the app (before it serves) a state holder whose new sessions are lazy."""
    assert not app.state_holder.session_data, "installed before the first session"
    holder = LazyStateHolder()
    holder.set_blocks(app.get_blocks())      # also points the Blocks' own reference at it
    app.state_holder = holder
