"""Least-squares quadratic fit f(u) = a*u^2 + b*u + c, with R^2.

Pure Python: the controller fits at most eight points at a time, where
solving the 3x3 normal equations directly is several times faster than
numpy's general solvers and needs no array allocations per tick.
"""

import dataclasses

# Utilization runs up to several thousand percent; fitting in hundreds of
# percent keeps the normal equations well conditioned.
_SCALE = 100.0
_SINGULAR = 1e-12


@dataclasses.dataclass(frozen=True)
class Quadratic:
    """A fitted scheduling-frequency curve over utilization in percent."""

    a: float
    b: float
    c: float
    r2: float
    points: int

    def __call__(self, util):
        x = util / _SCALE
        return (self.a * x + self.b) * x + self.c

    def slope(self, util):
        """df/du at ``util``, in switches per second per percent."""
        return (2.0 * self.a * util / _SCALE + self.b) / _SCALE


def fit(points):
    """Fit ``[(util, sf), ...]``; ``None`` if fewer than 3 distinct utils."""
    if len({u for u, _ in points}) < 3:
        return None
    s = [0.0] * 5
    t = [0.0] * 3
    for u, f in points:
        x = u / _SCALE
        xp = 1.0
        for k in range(5):
            if k < 3:
                t[k] += xp * f
            s[k] += xp
            xp *= x
    # Normal equations for (c, b, a): M @ [c, b, a] = t
    m = [[s[0], s[1], s[2], t[0]],
         [s[1], s[2], s[3], t[1]],
         [s[2], s[3], s[4], t[2]]]
    coeffs = _solve3(m)
    if coeffs is None:
        return None
    c, b, a = coeffs
    mean = sum(f for _, f in points) / len(points)
    ss_tot = sum((f - mean) ** 2 for _, f in points)
    ss_res = 0.0
    for u, f in points:
        x = u / _SCALE
        ss_res += (f - ((a * x + b) * x + c)) ** 2
    if ss_tot > 0.0:
        r2 = 1.0 - ss_res / ss_tot
    else:
        r2 = 1.0 if ss_res <= 1e-9 else 0.0
    return Quadratic(a, b, c, r2, len(points))


def _solve3(m):
    """Gaussian elimination with partial pivoting on a 3x4 matrix."""
    for col in range(3):
        pivot = max(range(col, 3), key=lambda r: abs(m[r][col]))
        if abs(m[pivot][col]) < _SINGULAR:
            return None
        m[col], m[pivot] = m[pivot], m[col]
        for row in range(col + 1, 3):
            factor = m[row][col] / m[col][col]
            for k in range(col, 4):
                m[row][k] -= factor * m[col][k]
    out = [0.0, 0.0, 0.0]
    for row in (2, 1, 0):
        acc = m[row][3] - sum(m[row][k] * out[k] for k in range(row + 1, 3))
        out[row] = acc / m[row][row]
    return out
