"""The one-line errors of a search target whose model could not be run (`last_failure`, for
`narbench.search_engine._target_run`): which try to name (the first input on the last device it was tried on), and
what to tell the user to do.

Each failure `_target_run` records is (device, step, exception, input described, round): round 0 is the first
input (the caller's, or the `real` build's guess), round 1 the further guesses (`_target_guesses`).
"""

from __future__ import annotations

from narbench.search_engine._target_inputs import TargetError


def one_line(exc: BaseException) -> str:
    """`Type: first line of the message`, at most 300 characters."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:300]


def needs_gradients(errors: list) -> bool:
    """Whether a forward failed only for its gradients (`GradientsNeededError`): another input will not help."""
    from narbench.zoo.extract import GradientsNeededError

    return any(isinstance(e[2], GradientsNeededError) for e in errors)


def last_failure(label: str, errors: list, inputs) -> TargetError:
    """What went wrong with the first input on the last device it was tried on (the `real` build's guess, or the
    caller's): a forward that needs gradients off, else `failure_line`'s line, saying how many other guesses failed."""
    from narbench.zoo.extract import GradientsNeededError

    grads = next((e for e in errors if isinstance(e[2], GradientsNeededError)), None)
    if grads is not None:
        exc, described = grads[2], grads[3]
        error = TargetError(f"the forward pass of {label} on {described} fails with gradients on "
                            f"({one_line(exc.cause)}) but runs with them off; narbench reads the graph from autograd's "
                            "record of the pass, so the forward must run with gradients on (e.g. .detach() before "
                            ".numpy(), no in-place change of a weight), or with inputs given by --inputs "
                            "FILE.py:FUNC with which it does")
        error.__cause__ = exc.cause
        return error
    firsts = [e for e in errors if e[4] == 0] or errors
    dev, step, exc, described, _ = [e for e in firsts if e[0] == firsts[-1][0]][0]
    tried = len({e[3] for e in errors if e[4] == 1 and e[1] == "forward"})
    error = failure_line(label, step, exc, described, inputs, tried)
    error.__cause__ = exc
    return error


def failure_line(label: str, step: str, exc: BaseException, described: str | None, inputs, tried: int = 0) -> TargetError:
    """The one line of a target whose last try failed at `step` (construct, input, forward) with `exc`; `tried`:
    how many other guessed inputs failed too."""
    if step == "construct":
        return TargetError(f"building {label} failed ({one_line(exc)}); fix the constructor or pass its "
                           "arguments with --kwargs '{\"name\": value}'")
    if step == "input":
        return TargetError(f"cannot make an example input for {label} ({one_line(exc)}); "
                           "give its shape with --input-shape")
    shown = f" on {described}" if described else ""
    if inputs is not None:
        return TargetError(f"the forward pass of {label}{shown} failed ({one_line(exc)}); check the example "
                           "inputs given (--inputs)")
    others = f" ({tried} other guessed input{'s' if tried != 1 else ''} failed too)" if tried > 0 else ""
    return TargetError(f"the forward pass of {label}{shown} failed ({one_line(exc)}){others}; if the input does not "
                       "fit, give the shape the model expects with --input-shape, e.g. --input-shape 1,3,32,32, "
                       "or several inputs with --input-shape repeated or --inputs FILE.py:FUNC")
