"""The two one-sided exact tests the rollout decides with (no SciPy: log-space sums).

Each sums at most a few thousand terms whatever the counts (the binomial tail only within
15 standard deviations of its mean; above ``EXACT_UP_TO`` events the normal
approximation), so no count can exhaust memory or time.

- ``poisson_rate_p(k_c, e_c, k_b, e_b)``: are the canary's events per exposure higher than
  the baseline's? Given ``n = k_c + k_b`` events in all, under equal rates the canary's
  count is Binomial(n, e_c / (e_c + e_b)) (the conditional test for two Poisson counts,
  Przyborowski and Wilenski, 1940); the p-value is P(X >= k_c).
- ``fisher_greater_p(f_c, n_c, f_b, n_b)``: is the canary's share of failing nodes higher?
  Fisher's exact test, one-sided: P(X >= f_c) for X hypergeometric with the table's margins.
"""

from __future__ import annotations

import math

EXACT_UP_TO = 100_000  # events: above, the normal approximation (a few terms, not n)


def _log_comb(n: int, k: int) -> float:
    return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)


def binomial_upper_p(k: int, n: int, p: float) -> float:
    """P(X >= k) for X ~ Binomial(n, p)."""
    if k <= 0:
        return 1.0
    if k > n:
        return 0.0
    if p <= 0.0:
        return 0.0
    if p >= 1.0:
        return 1.0
    mean, sd = n * p, math.sqrt(n * p * (1.0 - p))
    if n > EXACT_UP_TO:  # de Moivre-Laplace, continuity-corrected (error well under 1e-3)
        return 0.5 * math.erfc((k - 0.5 - mean) / (sd * math.sqrt(2.0)))
    lp, lq = math.log(p), math.log1p(-p)
    # terms farther than 15 standard deviations from the mean are below 1e-48 of the
    # largest: summing only the rest keeps the sum to a few thousand terms
    spread = 15.0 * sd + 15.0
    lo, hi = max(k, int(mean - spread)), min(n, int(mean + spread) + 1)
    if lo > hi:
        lo = hi = k  # the whole tail is beyond the window: its first term dominates
    terms = [_log_comb(n, i) + i * lp + (n - i) * lq for i in range(lo, hi + 1)]
    top = max(terms)
    return min(1.0, math.exp(top) * sum(math.exp(t - top) for t in terms))


def poisson_rate_p(k_c: int, e_c: float, k_b: int, e_b: float) -> float:
    """One-sided p-value that the canary's rate (k_c / e_c) exceeds the baseline's."""
    if e_c <= 0 or e_b <= 0:
        return 1.0
    return binomial_upper_p(k_c, k_c + k_b, e_c / (e_c + e_b))


def fisher_greater_p(f_c: int, n_c: int, f_b: int, n_b: int) -> float:
    """One-sided Fisher exact p-value that the canary's failing share exceeds the baseline's."""
    failing, total = f_c + f_b, n_c + n_b
    if failing == 0 or n_c == 0 or n_b == 0:
        return 1.0
    hi = min(failing, n_c)
    denom = _log_comb(total, n_c)
    terms = [
        _log_comb(failing, x) + _log_comb(total - failing, n_c - x) - denom
        for x in range(f_c, hi + 1)
        if n_c - x <= total - failing
    ]
    if not terms:
        return 0.0
    top = max(terms)
    return min(1.0, math.exp(top) * sum(math.exp(t - top) for t in terms))
