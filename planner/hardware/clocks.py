"""How far below its datasheet peak a power-capped or down-clocked variant of a part computes.

Tensor-core FLOP/s are (units × FLOPs per clock × clock), so peak scales with the sustained clock.
Under a power limit the clock falls until the board's dynamic power fits: CMOS dynamic power is
P = α·C·V²·f, and across the DVFS range the supply voltage tracks the clock (V ∝ f), so P ∝ f³
(Weste & Harris, CMOS VLSI Design, §5.1; the cubic rule NVIDIA's DVFS curves follow above the
voltage floor). A cap at P_cap of board power P_board then holds the clock at (P_cap / P_board)^(1/3)
of boost. That is an upper bound: at the voltage floor power falls only linearly with the clock,
so a deep cap can cost more (never less) than this, and the estimate never rises above a roof.
"""

from __future__ import annotations


def power_limited_clock_fraction(power_limit_w: float, board_power_w: float) -> float:
    """Clock under a power cap, as a share of the clock at full board power: (P_cap / P_board)^(1/3)."""
    return min(1.0, power_limit_w / board_power_w) ** (1 / 3)


def sustained_clock_fraction(clock_ratio: float | None, power_limit_w: float | None,
                             board_power_w: float | None) -> float:
    """Share of the datasheet's peak FLOP/s the part sustains: the stated clock ratio, the power cap's
    clock, whichever is lower; 1 for a part that states neither."""
    fraction = 1.0 if clock_ratio is None else clock_ratio
    if power_limit_w is not None and board_power_w:
        fraction = min(fraction, power_limited_clock_fraction(power_limit_w, board_power_w))
    return fraction
