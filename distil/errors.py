import difflib
from collections.abc import Iterable, Iterator


class DistilError(Exception):
    """A problem the user can fix; reported as one line, never as a traceback.

    The message says what is wrong and how to fix it.
    """


def error_chain(error: BaseException | None) -> Iterator[BaseException]:
    """The error, then the one it was raised from (or while handling), and so on, each once."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        yield error
        error = error.__cause__ or error.__context__


def did_you_mean(name: object, choices: Iterable[object]) -> str:
    """" (did you mean 'x'?)" for the one choice closest to a misspelt name, or "" when none is
    close: a typo's fix, named before the full list of choices that follows it."""
    by_folded = {str(c).lower(): str(c) for c in choices}  # a wrong case is a typo too (D1, mnli-m)
    close = difflib.get_close_matches(str(name).lower(), by_folded, n=1, cutoff=0.75)
    return f" (did you mean '{by_folded[close[0]]}'?)" if close else ""


def unknown_choice(setting: str, value: object, choices: Iterable[object], where: str = "", more: str = "") -> str:
    """The one wording for a value outside a closed set: `<where>: unknown <setting> '<value>' (did
    you mean '<closest>'?); choose one of: <choices><more>`. None is shown as YAML writes it, null."""
    choices = list(choices)
    names = ", ".join("null" if choice is None else str(choice) for choice in choices)
    prefix = f"{where}: " if where else ""
    return f"{prefix}unknown {setting} '{value}'{did_you_mean(value, choices)}; choose one of: {names}{more}"


def check_choice(setting: str, value: object, choices: Iterable[object], where: str = "", more: str = "") -> None:
    """A setting with a closed set of values: one message for all of them (unknown_choice)."""
    choices = list(choices)
    if value not in choices:
        raise DistilError(unknown_choice(setting, value, choices, where, more))
