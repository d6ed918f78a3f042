"""gradio's default theme with the colours that failed WCAG AA on this page (axe-core's colour-contrast rule,
``tests/test_browser_axe.py``) made darker: white on the default orange Run button read 2.8:1 (3.6:1 in dark
mode), white on the red Stop 3.8:1, the grey of every setting's description and of a slider's ends 1.9:1 on white
(washed out on a projector), a file's download link 4.0:1 on the dark panel. Everything else is gradio's."""

from __future__ import annotations

import gradio as gr


def theme() -> gr.themes.Base:
    return gr.themes.Default().set(
        body_text_color_subdued="*neutral_600",                     # 7.7:1 on white (was neutral_400, 1.9:1)
        button_primary_background_fill="*primary_700",             # white on it 5.2:1 (was primary_500, 2.8:1)
        button_primary_background_fill_hover="*primary_800",
        button_primary_background_fill_dark="*primary_700",        # (was primary_600, 3.6:1)
        button_primary_background_fill_hover_dark="*primary_800",
        button_cancel_background_fill="#b91c1c",                   # 6.5:1 (was #ef4444, 3.8:1), as in dark mode
        button_cancel_background_fill_hover="#991b1b",
        link_text_color_dark="*secondary_400",                     # 5.9:1 on the dark panel (was 4.0:1)
        link_text_color_visited_dark="*secondary_400",
        link_text_color_active_dark="*secondary_400",
    )
