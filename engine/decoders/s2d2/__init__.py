"""S2D2: training-free self-speculative decoding for block-diffusion LMs (Han et al., arXiv:2603.25702).

Terms (used the same way in code, UI and docs):

- **draft**: the ordinary block-diffusion forward (block size B); proposes a token x̂_i at every masked position,
  sampled from the draft distribution p_i.
- **verify**: one extra forward of the *same* model in block-size-1 (AR) mode through the 2L mask; gives the
  verifier distribution q_i for each position of the span.
- **span** C_t: the first contiguous run of masked positions in the block; only it can be verified, because AR
  mode needs every earlier position fixed.
- **accept / reject / resample**: x̂_i is accepted with probability min(1, (q_i/p_i)^γ); at the first rejection a
  token is drawn from normalize(max(q − p, 0)) and the rest of the span stays masked. No bonus token.
- **estimator** α_i: a cheap guess, from the draft alone, of the chance that x̂_i is accepted.
- **router**: decides per step whether the verify forward is worth its cost, from K̂ = Σ_k Π_{i≤k} α_i (expected
  accepted tokens), N_hi (tokens the threshold rule would commit anyway) and the score s = K̂ − c or K̂ − c·N_hi.
"""
