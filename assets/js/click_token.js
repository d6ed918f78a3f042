// clicking a token in the text view selects its position in every view
element.addEventListener('click', (e) => { const t = e.target.closest('[data-pos]'); if (t) trigger('click', {pos: t.dataset.pos}); });
