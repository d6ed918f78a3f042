// Stop: the run's state in words at once, from the last frame this browser shows, before the server has ended the
// cancelled request (a loaded machine takes seconds); the server's stopped run then redraws the same words, with the
// slider over the steps decoded (explorer/page/run.py show_stopped, explorer/scrub.py ended_line)
() => {
  const step = document.querySelector('#text .um-text[data-finished="0"] .um-step');
  const m = step && /^decoding… step (\d+) done, (\d+) of (\d+) slots still to decide/.exec(step.textContent);
  if (!m || step.parentNode.querySelector('.um-ended')) return [];
  const note = document.createElement('div');
  note.className = 'um-ended';
  note.setAttribute('role', 'status');
  note.textContent = `Stopped at step ${m[1]}, when you pressed Stop: ${m[2]} of ${m[3]} slots were still to ` +
    `decide. The slider scrubs the ${m[1]} steps decoded; Run decodes it again from its first step.`;
  step.textContent = step.textContent.replace(m[0], `step ${m[1]} / ${m[1]}`);
  step.after(note);
  return [];
}
