"""Options and helpers shared by the CLI commands (kept light: no pandas/torch at import)."""

from __future__ import annotations

import functools
import json
import math

import click

from sdsl.plan.report import format_table, proposer_warnings  # noqa: F401 (the commands' tables and warnings)

__all__ = ["json_option", "calibration_option", "engine_option", "deployment_options", "resolve_latency_params", "echo_json",
           "format_table", "parse_int_list", "acceptance_options", "AcceptanceChoice", "parse_float_list", "workload_option",
           "acceptance_for_option", "parse_acceptance_for", "WORKLOAD_HELP", "proposer_warnings",
           "check_accepted_length", "split_entries", "json_text"]

json_option = click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")
calibration_option = click.option(
    "--calibration", type=click.Path(dir_okay=False), default=None,
    help="Calibration JSON from `sdsl calibrate` (latency parameters fitted to measurements).",
)


def resolve_latency_params(calibration, hardware):
    """LatencyParams from a calibration file, else the packaged default for the hardware."""
    from sdsl.roofline.latency import default_params

    if calibration:
        from sdsl.fit.calibration import load_latency_params

        return load_latency_params(calibration, hardware)
    return default_params(hardware)


DTYPES = ["bf16", "fp16", "fp8", "fp32"]


ENGINE_HELP = ("Engine execution profile that prices host time around the GPU work: vllm (newest) | vllm:2025-04 "
               "(newest not after that month) | sglang | sglang-spec-v2 | trtllm | gpt-fast | hf-eager | llamacpp | "
               "a profile name (`sdsl engines`) | FILE.json (`sdsl calibrate engine`) | ideal (the roofline alone: no "
               "host time, NCCL all-reduce). Default: the newest vLLM profile (ideal on a CPU).")
engine_option = click.option("--engine", default=None, help=ENGINE_HELP)


def deployment_options(*, context: bool = True, tp_help: str = "Tensor-parallel degree of the target."):
    """Add --hardware, [--context], --tp, --ep, --draft-tp, --dtype, --kv-dtype, --calibration and --engine to a command
    and hand it
    ONE ``deployment`` argument (a :class:`sdsl.roofline.deployment.Deployment`) built from them."""
    options = [
        click.option("--hardware", default="h100-sxm", show_default=True, help="Hardware (catalog name or TOML/JSON file)."),
        *([click.option("--context", default=1024, show_default=True, type=int,
                        help="Tokens in each sequence's KV cache.")] if context else []),
        click.option("--tp", default=1, show_default=True, type=int, help=tp_help),
        click.option("--ep", default=1, show_default=True, type=int,
                     help="Expert-parallel degree of an MoE target (divides --tp; e.g. --tp 8 --ep 8)."),
        click.option("--draft-tp", default=1, show_default=True, type=int, help="Tensor-parallel degree of a draft model."),
        click.option("--dtype", default="bf16", show_default=True, type=click.Choice(DTYPES),
                     help="Compute dtype; fp8: the linear layers in fp8 as the engines' fp8 quantization runs them "
                          "(KV cache, attention and LM head in bf16)."),
        click.option("--kv-dtype", default=None, type=click.Choice(DTYPES),
                     help="KV-cache element type when it differs from the compute dtype (fp8: the engines' "
                          "--kv-cache-dtype fp8, priced on their measured fp8-KV attention). Default: the compute dtype."),
        calibration_option,
        engine_option,
    ]

    def decorate(command):
        @functools.wraps(command)
        def wrapper(*args, hardware, tp, ep, draft_tp, dtype, kv_dtype, calibration, engine, **kwargs):
            from sdsl.catalog.hardware import get_hardware
            from sdsl.roofline.deployment import precision_options
            from sdsl.roofline.deployment import Deployment

            extra = {"context": kwargs.pop("context")} if context else {}
            hw = get_hardware(hardware)
            params = resolve_latency_params(calibration, hw) if calibration else None  # None: the engine's defaults
            deployment = Deployment(hw, tp=tp, ep=ep, draft_tp=draft_tp, params=params, engine=engine,
                                    kv_dtype=kv_dtype, **precision_options(dtype), **extra)
            return command(*args, deployment=deployment, **kwargs)

        for option in reversed(options):
            wrapper = option(wrapper)
        return wrapper

    return decorate


def json_text(obj, *, sort_keys: bool = False) -> str:
    """``obj`` as indented JSON text, NaN and infinity as null (as :meth:`sdsl._result.Result.to_json` writes them)."""
    from sdsl._result import finite_or_none, plain

    return json.dumps(finite_or_none(plain(obj)), indent=2, sort_keys=sort_keys, allow_nan=False, default=float)


def echo_json(obj, *, sort_keys: bool = False) -> None:
    """Print ``obj`` as indented JSON (NaN/inf become null)."""
    click.echo(json_text(obj, sort_keys=sort_keys))


def split_entries(text: str, name: str, example: str) -> list[str]:
    """The comma-separated entries of an option's value; an empty entry ('1,,8', '1,8,') is one InvalidInputError."""
    from sdsl.errors import InvalidInputError

    entries = str(text).replace(" ", "").split(",")
    if entries == [""]:
        raise InvalidInputError(f"{name} is empty; give a list like {example}.")
    if "" in entries:
        raise InvalidInputError(f"{name} has an empty entry in {text!r}; give a list like {example}.")
    return entries


def parse_int_list(text: str, name: str) -> list[int]:
    """'1,2,8' -> [1, 2, 8]; '1-8' -> [1, ..., 8]. Bad text raises InvalidInputError naming the option."""
    from sdsl.errors import InvalidInputError

    text = str(text).replace(" ", "")
    try:
        if "-" in text.lstrip("-") and "," not in text:
            lo, hi = (int(v) for v in text.split("-"))
            if hi < lo:
                raise InvalidInputError(f"{name} range {text!r} is reversed; write it low-high, e.g. {hi}-{lo}.")
            return list(range(lo, hi + 1))
        return [int(v) for v in split_entries(text, name, "1,2,8 or a range like 1-8")]
    except InvalidInputError:
        raise
    except ValueError:
        raise InvalidInputError(f"{name} takes comma-separated integers or a range like '1-8'; got {text!r}.") from None


def parse_float_list(text: str, name: str) -> list[float]:
    """'0.8,0.6,0.4' -> [0.8, 0.6, 0.4]. Bad text raises InvalidInputError naming the option."""
    from sdsl.errors import InvalidInputError

    entries = split_entries(text, name, "0.8,0.6,0.4")
    try:
        return [float(v) for v in entries]
    except ValueError:
        raise InvalidInputError(f"{name} takes comma-separated numbers like 0.8,0.6,0.4; got {text!r}.") from None


class AcceptanceChoice:
    """What the user gave for acceptance: at most one of --alpha, --accepted-length, --acceptance,
    --acceptance-file. :meth:`resolve` turns it into a :class:`sdsl.acceptance.vector.Acceptance`."""

    def __init__(self, alpha=None, accepted_length=None, accepted_at=None, acceptance=None, acceptance_kind="marginal",
                 acceptance_file=None):
        from sdsl.errors import InvalidInputError

        given = [n for n, v in (("--alpha", alpha), ("--accepted-length", accepted_length),
                                ("--acceptance", acceptance), ("--acceptance-file", acceptance_file)) if v is not None]
        if len(given) > 1:
            raise InvalidInputError(f"Give at most one of {', '.join(given)}: each sets the acceptance.")
        self.alpha, self.accepted_length, self.accepted_at = alpha, accepted_length, accepted_at
        self.acceptance, self.kind, self.file = acceptance, acceptance_kind, acceptance_file
        self.given = given[0] if given else None

    @property
    def measured(self) -> bool:
        """True for one proposer's measurement (--accepted-length, --acceptance, --acceptance-file); False for
        nothing or an i.i.d. what-if level (--alpha)."""
        return self.given not in (None, "--alpha")

    def resolve(self, k: int | None = None, decay: float | None = None, bare_accepted_at: bool = False):
        """The Acceptance, or None when nothing was given (the caller then resolves each proposer's own). ``k``
        is the draft length --accepted-length was measured at when --accepted-at is absent (predict's --gamma);
        ``decay`` the decay ratio of the proposer it was measured on (default: the group of every proposer but
        EAGLE-1 heads and a chained MTP module, r = 1: sdsl's one rule across k, :func:`sdsl.acceptance.group_decay`);
        ``bare_accepted_at``: --accepted-at may stand alone (it qualifies --acceptance-for values)."""
        from sdsl.acceptance import check_alpha
        from sdsl.acceptance import Acceptance
        from sdsl.errors import InvalidInputError

        if self.accepted_at is not None and self.accepted_length is None and not bare_accepted_at:
            raise InvalidInputError("--accepted-at only qualifies --accepted-length; give both or neither.")
        if self.given is None:
            return None
        if self.alpha is not None:
            return Acceptance.from_iid(float(check_alpha(self.alpha, open_interval=True)))
        if self.accepted_length is not None:
            check_accepted_length(self.accepted_length, "--accepted-length")
            at = self.accepted_at if self.accepted_at is not None else k
            if at is None:
                raise InvalidInputError("--accepted-length needs --accepted-at K, the draft length it was measured at.")
            from sdsl.acceptance import group_decay

            return Acceptance.from_accepted_length(self.accepted_length, at,
                                                   decay=group_decay("other") if decay is None else decay)
        if self.acceptance is not None:
            values = parse_float_list(self.acceptance, "--acceptance")
            if self.kind == "conditional":
                return Acceptance.from_conditional(values)
            return Acceptance.from_marginal(values)
        from sdsl._io import load_json

        return Acceptance.from_dict(load_json(self.file))


ALPHA_HELP = ("i.i.d. per-token acceptance rate in (0, 1) (Leviathan et al.), a what-if level for every proposer "
              "ranked; default: each proposer's own (published catalog, SDSL's plane for drafts).")
ACCEPTED_AT_HELP = "Draft length k the --accepted-length was measured at (default: --gamma)."


def acceptance_options(command=None, *, alpha_help: str = ALPHA_HELP, accepted_at_help: str = ACCEPTED_AT_HELP):
    """Add --alpha, --accepted-length/--accepted-at, --acceptance/--acceptance-kind and --acceptance-file
    to a command; they reach it as one ``acceptance`` argument (an :class:`AcceptanceChoice`). Used bare
    (``@acceptance_options``) or called with the command's own --alpha and --accepted-at help."""
    if command is None:
        return functools.partial(acceptance_options, alpha_help=alpha_help, accepted_at_help=accepted_at_help)
    options = [
        click.option("--alpha", type=float, default=None, help=alpha_help),
        click.option("--accepted-length", type=float, default=None,
                     help="Mean accepted length per step, bonus token included, as vLLM/SGLang/Spec-Bench print it: "
                          "one proposer's measurement (with several proposers use --acceptance-for)."),
        click.option("--accepted-at", type=int, default=None, help=accepted_at_help),
        click.option("--acceptance", default=None,
                     help="Per-position acceptance p1,p2,... (marginal rates as vLLM logs them; see --acceptance-kind)."),
        click.option("--acceptance-kind", type=click.Choice(["marginal", "conditional"]), default="marginal",
                     show_default=True, help="How to read --acceptance: marginal P(i accepted) or P(i | 1..i-1 accepted)."),
        click.option("--acceptance-file", type=click.Path(dir_okay=False), default=None,
                     help="Acceptance JSON written by `sdsl acceptance` (e.g. --from-log)."),
    ]

    @functools.wraps(command)
    def wrapper(*args, alpha, accepted_length, accepted_at, acceptance, acceptance_kind, acceptance_file, **kwargs):
        choice = AcceptanceChoice(alpha, accepted_length, accepted_at, acceptance, acceptance_kind, acceptance_file)
        return command(*args, acceptance=choice, **kwargs)

    for option in reversed(options):
        wrapper = option(wrapper)
    return wrapper


def check_accepted_length(value: float, name: str) -> float:
    """A mean accepted length (bonus token included) must be finite and at least 1: one InvalidInputError line."""
    from sdsl.errors import InvalidInputError

    if not math.isfinite(value):
        raise InvalidInputError(f"{name} must be a finite mean accepted length (at least 1, the bonus token); got {value:g}.")
    return value


WORKLOAD_HELP = ("Workload whose published acceptance prices proposers without a given one: chat | code | math | "
                 "summarization | rag | translation | mixed | other (sdsl/data/acceptance/README.md).")
workload_option = click.option("--workload", default="chat", show_default=True, help=WORKLOAD_HELP)
acceptance_for_option = click.option(
    "--acceptance-for", "acceptance_for", multiple=True, metavar="PROPOSER=TAU[@K]|M1,M2,...",
    help="One proposer's measured acceptance (repeatable): its mean accepted length TAU (bonus included) at K "
         "drafts (K from --accepted-at when @K is left out), or its per-position marginal rates; e.g. eagle3=3.1@4.")


def parse_acceptance_for(items, accepted_at: int | None = None) -> dict:
    """{proposer name: Acceptance} from --acceptance-for values; a malformed one is one InvalidInputError line.
    An accepted length is fitted with the decay ratio of the proposer's kind
    (:func:`sdsl.acceptance.group_decay`)."""
    from sdsl.acceptance import Acceptance, group_decay
    from sdsl.errors import InvalidInputError

    out = {}
    for item in items:
        name, eq, value = str(item).partition("=")
        name, value = name.strip(), value.strip().replace(" ", "")
        if not eq or not name or not value:
            raise InvalidInputError(f"--acceptance-for takes PROPOSER=TAU@K or PROPOSER=M1,M2,...; got {item!r}.")
        if name in out:
            raise InvalidInputError(f"--acceptance-for gives {name} twice.")
        kind = name.split(":")[0].lower()
        if "," in value:
            rates = parse_float_list(value, f"--acceptance-for {name}")
            out[name] = Acceptance.from_marginal(rates, source=f"given:{name}")
            continue
        try:
            tau_text, at, k_text = value.partition("@")
            tau_value = float(tau_text)
            k = int(k_text) if at else accepted_at
        except ValueError:
            raise InvalidInputError(f"--acceptance-for {item!r}: expected TAU@K (numbers) or comma-separated rates.") from None
        check_accepted_length(tau_value, f"--acceptance-for {name}")
        if k is None:
            raise InvalidInputError(f"--acceptance-for {item!r} needs the draft length it was measured at: {name}={value}@K "
                                    "or --accepted-at K.")
        if tau_value < 1:
            raise InvalidInputError(f"--acceptance-for {item!r}: a mean accepted length counts the bonus token, so it is at "
                                    "least 1; give per-position rates as a comma-separated list.")
        out[name] = Acceptance.from_accepted_length(tau_value, k, decay=group_decay(kind), source=f"given:{name}")
    return out
