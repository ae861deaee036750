"""Compiled loops of `narbench.train.dropout` (numba): torch's CPU Mersenne Twister, ReLU + dropout.

The generator is ATen's `mt19937` (`ATen/core/MT19937RNGEngine.h`) on the state `torch.get_rng_state()`
serialises: 624 words, `left` and `next`. A call of the engine decrements `left`, twists the state
when it reaches 0 (then `left` = 624, `next` = 0) and returns the tempered word `state[next++]`.
`bernoulli_(p)` on a CPU float tensor draws, per element in memory order, a 64-bit number from two
words (the first the high half), keeps its low 53 bits as a double in [0, 1) and keeps the element
when that is below p (`at::bernoulli_distribution<double>`).
"""

from __future__ import annotations

import numpy as np
from numba import njit

N, M = 624, 397
_UPPER, _LOWER, _MATRIX = np.uint32(0x80000000), np.uint32(0x7fffffff), np.uint32(0x9908b0df)


@njit(cache=True, inline="always")
def _mix(a, b, c):
    """The twist of one word: a, b its two neighbours' halves, c the word M ahead (branch-free)."""
    y = (a & _UPPER) | (b & _LOWER)
    return c ^ (y >> np.uint32(1)) ^ ((np.uint32(0) - (y & np.uint32(1))) & _MATRIX)


@njit(cache=True)
def _twist(state):
    for i in range(N - M):
        state[i] = _mix(state[i], state[i + 1], state[i + M])
    for i in range(N - M, N - 1):
        state[i] = _mix(state[i], state[i + 1], state[i + M - N])
    state[N - 1] = _mix(state[N - 1], state[0], state[M - 1])


@njit(cache=True)
def _temper(words, out):
    """MT19937's tempering of each word (kept in 32 bits at every step: the loop vectorises)."""
    for j in range(words.shape[0]):
        y = np.uint32(words[j])
        y = np.uint32(y ^ (y >> np.uint32(11)))
        y = np.uint32(y ^ ((y << np.uint32(7)) & np.uint32(0x9d2c5680)))
        y = np.uint32(y ^ ((y << np.uint32(15)) & np.uint32(0xefc60000)))
        out[j] = np.uint32(y ^ (y >> np.uint32(18)))


@njit(cache=True)
def _words(state, left, nxt, out):
    """Fill `out` with the engine's next words; (left, next) after them."""
    avail = left - 1  # words before the next twist: state[nxt : nxt + avail]
    filled = 0
    while filled < out.shape[0]:
        if avail == 0:
            _twist(state)
            nxt = 0
            avail = N
        take = min(avail, out.shape[0] - filled)
        _temper(state[nxt:nxt + take], out[filled:filled + take])
        nxt += take
        avail -= take
        filled += take
    return avail + 1, nxt


@njit(cache=True)
def relu_dropout(x, keep, scale, state, left, nxt, out, code):
    """out = relu(x) * noise, noise = scale where bernoulli(keep) keeps the element, else 0, the draws
    torch's `bernoulli_` makes; `code` for the gradient: 0 where relu(x) <= 0, 1 dropped, 2 kept.
    Returns (left, next) of the generator after the draws."""
    chunk = 4096
    words = np.empty(2 * chunk, dtype=np.uint32)
    # kept <=> (low 53 bits) * 2^-53 < keep <=> low 53 bits < ceil(keep * 2^53): exact, all in integers
    below = np.uint64(np.ceil(keep * 2.0 ** 53))
    high21 = np.uint64((1 << 21) - 1)
    zero = np.float32(0.0)
    n = x.shape[0]
    for start in range(0, n, chunk):
        count = min(chunk, n - start)
        left, nxt = _words(state, left, nxt, words[:2 * count])
        for j in range(count):
            low53 = ((np.uint64(words[2 * j]) & high21) << np.uint64(32)) | np.uint64(words[2 * j + 1])
            kept = low53 < below
            v = x[start + j]
            relu = zero if v < zero else v
            out[start + j] = relu * (scale if kept else zero)
            code[start + j] = np.uint8(not relu <= zero) * np.uint8(1 + kept)
    return left, nxt


@njit(cache=True)
def relu_dropout_backward(grad, code, scale, out):
    """The gradient of `relu_dropout`: 0 where code is 0, else grad times the element's noise."""
    zero = np.float32(0.0)
    for i in range(grad.shape[0]):
        c = code[i]
        out[i] = zero if c == 0 else grad[i] * (scale if c == 2 else zero)
    return out
