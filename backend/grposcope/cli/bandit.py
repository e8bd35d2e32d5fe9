"""`grposcope bandit run|sweep`: the softmax-bandit lab (docs/model.md §2.5), from a shell."""

from __future__ import annotations

import argparse


def _add_config_args(p: argparse.ArgumentParser, k_ref: bool) -> None:
    p.add_argument(
        "--arms",
        type=float,
        nargs="+",
        default=[1.0, 0.0],
        metavar="R",
        help="reward of each arm (default: 1 0)",
    )
    p.add_argument("--lr", type=float, default=0.1, help="learning rate (default 0.1)")
    p.add_argument(
        "--momentum", type=float, default=0.5, help="heavy-ball momentum of SGD (default 0.5)"
    )
    p.add_argument(
        "--beta",
        type=float,
        default=1.0,
        help="KL coefficient to the uniform reference (default 1.0)",
    )
    p.add_argument("--G", type=int, default=8, help="samples per group (default 8)")
    if k_ref:
        p.add_argument(
            "--k-ref", type=int, default=1, help="optimizer steps between regenerations (default 1)"
        )
    p.add_argument(
        "--correction",
        choices=("none", "is", "is_clipped"),
        default="none",
        help="importance correction of stale samples (default none)",
    )
    p.add_argument("--clip-eps", type=float, default=0.2, help="ratio clip for is_clipped")
    p.add_argument(
        "--advantage",
        choices=("mean", "mean_trl", "std", "critic"),
        default="mean",
        help="group advantage: mean (leave-one-out, default), mean_trl (TRL scale_rewards="
        "'none'), std (TRL's default, divided by the group std), critic (exact baseline)",
    )


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bandit", help="softmax-bandit lab: GRPO where the model is exact")
    bsub = p.add_subparsers(dest="bandit_command", required=True, metavar="ACTION")
    run = bsub.add_parser("run", help="simulate one run; CSV step,reward,expected_reward")
    _add_config_args(run, k_ref=True)
    run.add_argument("--steps", type=int, default=500, help="optimizer steps (default 500)")
    run.add_argument("--seed", type=int, default=0, help="sampling seed (default 0)")
    run.add_argument(
        "--deterministic",
        action="store_true",
        help="infinite-sample limit (the expected update, no noise)",
    )
    run.add_argument("--csv", metavar="OUT", help="write the trajectory as CSV ('-': stdout)")
    run.set_defaults(handler=run_bandit)
    sweep = bsub.add_parser("sweep", help="K_ref sweep: measured vs predicted stability threshold")
    _add_config_args(sweep, k_ref=False)
    sweep.add_argument("--max-k-ref", type=int, default=256, help="largest K_ref (default 256)")
    sweep.add_argument(
        "--perturbation",
        type=float,
        default=1e-5,
        help="initial offset from the fixed point, in logits (default 1e-5)",
    )
    sweep.add_argument("--json", action="store_true", help="machine-readable output")
    sweep.set_defaults(handler=sweep_bandit)


def _config(args: argparse.Namespace, k_ref: int):
    from grposcope.cli.common import CliError
    from grposcope.dynamics.bandit import BanditConfig

    try:
        return BanditConfig(
            rewards=tuple(args.arms),
            lr=args.lr,
            momentum=args.momentum,
            beta=args.beta,
            G=args.G,
            k_ref=k_ref,
            correction=args.correction,
            clip_eps=args.clip_eps,
            advantage=args.advantage,
        )
    except ValueError as exc:
        raise CliError(str(exc)) from None


def run_bandit(args: argparse.Namespace) -> int:
    import csv
    import sys

    from grposcope.cli.common import CliError, ProgressBar
    from grposcope.dynamics.bandit import run

    cfg = _config(args, args.k_ref)
    if args.steps < 1:
        raise CliError(f"--steps must be >= 1, got {args.steps}")
    with ProgressBar("bandit run", unit="step") as bar:
        traj = run(cfg, args.steps, seed=args.seed, deterministic=args.deterministic,
                   progress=bar)  # fmt: skip
    if args.csv:
        try:
            out = sys.stdout if args.csv == "-" else open(args.csv, "w", newline="")  # noqa: SIM115
        except OSError as exc:
            raise CliError(f"cannot write {args.csv}: {exc.strerror}") from None
        try:
            writer = csv.writer(out)
            writer.writerow(["step", "reward", "expected_reward"])
            for step, rew, exp in zip(traj.steps, traj.reward, traj.expected_reward, strict=True):
                writer.writerow([int(step), f"{rew:.10g}", f"{exp:.10g}"])
        finally:
            if out is not sys.stdout:
                out.close()
    if args.csv != "-":
        print(
            f"{args.steps} steps, p0 = {traj.expected_reward[0]:.4f}, "
            f"final expected reward = {traj.expected_reward[-1]:.4f}{_p_star_text(cfg)}"
            + (f"; CSV written to {args.csv}" if args.csv else "")
        )
    return 0


def _p_star_text(cfg) -> str:
    """The fixed point where it is known: the potential's p* is the finite-G fixed point only
    for the unbiased advantages ('mean', 'critic'); 'mean_trl' shrinks the reward force by
    (G - 1)/G and 'std' has no potential."""
    from grposcope.dynamics.bandit import fixed_point

    if cfg.advantage == "std":
        return ""
    p_star = fixed_point(cfg).p_star
    return f", p* = {p_star:.4f}" + (" (G -> infinity)" if cfg.advantage == "mean_trl" else "")


def sweep_bandit(args: argparse.Namespace) -> int:
    from grposcope.cli.common import CliError, ProgressBar, print_json
    from grposcope.dynamics.bandit_sweep import sweep

    cfg = _config(args, 1)
    if args.max_k_ref < 1:
        raise CliError(f"--max-k-ref must be >= 1, got {args.max_k_ref}")
    if not args.perturbation > 0:
        raise CliError(f"--perturbation must be > 0, got {args.perturbation}")
    try:
        with ProgressBar("K_ref sweep", unit="step") as bar:
            result = sweep(cfg, args.max_k_ref, perturbation=args.perturbation, progress=bar)
    except ValueError as exc:
        raise CliError(str(exc)) from None
    if args.json:
        print_json(result.to_dict())
        return 0
    _print_human(result, args.correction)
    return 0


def _fmt(value: object) -> str:
    return "none found" if value is None else str(value)


def _print_human(r, correction: str) -> None:
    print(
        f"stiffness K = {r.stiffness:.4g} (stale {r.stiffness_stale:.4g}, "
        f"current {r.stiffness_current:.4g}); p* = {r.p_star:.4f}; "
        f"stale share under '{correction}' = {r.stale_share:.3g}"
    )
    print(f"K_ref stability threshold (1..{r.max_k_ref}):")
    print(f"  measured              {_fmt(r.measured_k_ref_threshold)}")
    print(f"  predicted, exact      {_fmt(r.predicted_k_ref_threshold_exact)}")
    print(f"  predicted, continuum  {_fmt(r.predicted_k_ref_threshold_continuum)}")
    cont = r.predicted_oscillatory_k_ref_continuum
    print("overdamped -> oscillatory at K_ref:")
    print(f"  measured              {_fmt(r.measured_oscillatory_k_ref)}")
    print(f"  predicted, exact      {_fmt(r.predicted_oscillatory_k_ref_exact)}")
    print(f"  continuum zeta = 1    {_fmt(None if cont is None else round(cont, 2))}")
    at, before = r.zeta_exact_at_measured_oscillatory, r.zeta_exact_before_measured_oscillatory
    if at is not None:
        print(
            f"  zeta_exact at the measured transition {at:.3f}"
            + ("" if before is None else f" (one K_ref before: {before:.3f})")
        )
    if r.stale_share == 0:
        print("the lag term does not apply: no part of the force is stale in this mode")
