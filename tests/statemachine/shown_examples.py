"""Two corpora of model answers for the rules that read calls written without an opener (issue 38, issue 43).

``SHOWN``: answers that show JSON (or Python) without meaning a call: API documentation with a request
body, configuration examples, refusals that show an example body, function definitions, list
comprehensions, tutorials, JSON data, and BFCL irrelevance-style answers that name a tool. Under ``auto``
none of them may become a call, whatever tools are offered (the tool they are about alone, or all).

``MEANT``: answers that mean calls, in the forms the real small model wrote on BFCL's cases
(``/work/shared/docs/bfcl.md``: bare JSON call objects, one or two ```` ```json ```` fences, BFCL-style
``[f(a=1)]`` lists one per line, a fenced call after "Here's how you would call it:", the one offered
tool's arguments alone); every one must become exactly its calls.

Each answer is built from its parts so that the corpus varies the framing (what is said around the JSON),
the form (bare, fenced, named, nameless, OpenAI-shaped) and the tool; the issue's own examples are in it
verbatim.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

# tools -------------------------------------------------------------------------------------------------

def _schema(required: list[str], **properties: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required}


_S, _I, _N, _B = {"type": "string"}, {"type": "integer"}, {"type": "number"}, {"type": "boolean"}

#: The tools the answers are about: name → parameters schema.
TOOLS: dict[str, dict[str, Any]] = {
    "send_email": _schema(["to", "subject", "body"], to=_S, subject=_S, body=_S),
    "delete_repo": _schema(["repo"], repo=_S, confirm=_B),
    "get_weather": _schema(["location"], location=_S, days=_I, unit={"type": "string", "enum": ["c", "f"]}),
    "calculate_weight_in_space": _schema(["mass", "planet"], mass=_N, planet=_S),
    "create_user": _schema(["username", "email"], username=_S, email=_S, age=_I),
    "search_web": _schema(["query"], query=_S, limit=_I),
    "transfer_money": _schema(["from_account", "to_account", "amount"], from_account=_S, to_account=_S,
                              amount=_N),
    "book_flight": _schema(["origin", "destination", "date"], origin=_S, destination=_S, date=_S),
}

#: Realistic arguments per tool (what a doc, a refusal or a call would hold).
ARGUMENTS: dict[str, list[dict[str, Any]]] = {
    "send_email": [{"to": "boss@example.com", "subject": "Resignation", "body": "I quit."},
                   {"to": "team@acme.io", "subject": "Standup moved", "body": "Standup is at 10:30 today."}],
    "delete_repo": [{"repo": "acme/legacy-api", "confirm": True}, {"repo": "octo/old-site"}],
    "get_weather": [{"location": "London", "days": 3}, {"location": "Paris, France", "unit": "c"}],
    "calculate_weight_in_space": [{"mass": 70, "planet": "Mars"}, {"mass": 12.5, "planet": "Jupiter"}],
    "create_user": [{"username": "jdoe", "email": "jdoe@example.com", "age": 31},
                    {"username": "ana", "email": "ana@corp.example"}],
    "search_web": [{"query": "best pizza in Naples", "limit": 5}, {"query": "python asyncio tutorial"}],
    "transfer_money": [{"from_account": "CHK-001", "to_account": "SAV-002", "amount": 250.0}],
    "book_flight": [{"origin": "LIS", "destination": "JFK", "date": "2026-12-20"}],
}


@dataclass(frozen=True)
class Shown:
    """An answer that shows JSON or code without meaning a call."""

    kind: str
    text: str
    tools: tuple[str, ...]  # the tools it is about (tested alone, and with every tool)


@dataclass(frozen=True)
class Meant:
    """An answer that means calls: ``calls`` are ``(name, arguments)`` in order; ``text`` what stays content."""

    kind: str
    answer: str
    tools: tuple[str, ...]
    calls: tuple[tuple[str, dict[str, Any]], ...]
    text: str = ""


def _j(value: Any) -> str:
    return json.dumps(value)


def _call(name: str, args: dict[str, Any]) -> str:
    return _j({"name": name, "arguments": args})


def _fence(body: str, lang: str = "json") -> str:
    return f"```{lang}\n{body}\n```"


def _pairs() -> list[tuple[str, dict[str, Any]]]:
    return [(name, args) for name, many in ARGUMENTS.items() for args in many]


# answers that show JSON without meaning a call ----------------------------------------------------------

#: Documentation of a request body: (text before, text after); the body goes between them.
_DOCS = [
    ("To do this through the REST API, send a POST request with a JSON body like this:\n", "\n\nThe server answers 202 Accepted."),
    ("The endpoint expects the following request body:\n", "\nAll fields are strings unless noted."),
    ("Example request body:\n", ""),
    ("For reference, the API takes a body like: ", ""),
    ("I will not send anything without your confirmation. For reference, the API takes a body like:\n", ""),
    ("Here is what the payload would look like (I have not sent it):\n", "\nLet me know if you want me to go ahead."),
    ("The documentation describes the request format as follows.\n\n", "\n\nOptional fields may be left out."),
    ("A sample request, for illustration only:\n", "\n"),
    ("You can test it with curl by posting this JSON to the endpoint:\n", "\nReplace the values with your own."),
    ("In the API reference, the schema of the request is shown with this example:\n", ""),
    ("I can't do that without your approval. If you approve, the request would be:\n", "\nShall I proceed?"),
    ("Before I do anything, please confirm these details:\n", "\nIs that right?"),
    ("Here's the structure of the JSON you would need to send:\n", ""),
    ("The webhook receives a body in this format:\n", "\nIt is signed with your secret."),
    ("Do you want me to send this? Draft:\n", ""),
    ("", "\n\nThat is the request body the API expects; nothing was sent."),
]


def _docs() -> list[Shown]:
    out = []
    for i, (before, after) in enumerate(_DOCS):
        for name, args in _pairs()[i % 3::3]:
            body = _j(args) if i % 2 else json.dumps(args, indent=2)
            wrapped = body if i % 4 == 3 else _fence(body, ("json", "", "http", "json")[i % 4])
            out.append(Shown("api_doc", before + wrapped + after, (name,)))
            named = _call(name, args)
            out.append(Shown("api_doc_named", before + _fence(named) + after, (name,)))
    return out


#: Configuration examples: JSON that is no call (some keys happen to be a tool's).
_CONFIGS = [
    {"location": "eu-west-1", "days": 30},
    {"name": "my-app", "version": "1.0.0", "scripts": {"start": "node index.js"}},
    {"compilerOptions": {"target": "es2022", "strict": True}},
    {"name": "get_weather", "description": "Weather lookups", "enabled": True},
    {"query": "SELECT 1", "limit": 10, "timeout_ms": 500},
    {"to": "ops@example.com", "subject": "[alert] disk", "body": "{{message}}"},
    {"repo": "acme/app", "branch": "main", "protected": True},
    {"mass": 1.0, "planet": "earth", "units": "kg"},
    {"username": "admin", "email": "admin@example.com", "password": "change-me"},
]
_CONFIG_FRAMES = [
    ("Here's an example configuration:\n", "\nSave it as `config.json`."),
    ("Your settings file should look like this:\n\n", ""),
    ("", "\n\nThat is the configuration file; adjust the values to your environment."),
    ("Config:\n", ""),
]


def _fitting(value: dict[str, Any]) -> tuple[str, ...]:
    """The tools whose parameters ``value``'s keys could be (every tool when none)."""
    fits = tuple(name for name, schema in TOOLS.items() if value.keys() <= schema["properties"].keys())
    return fits or tuple(TOOLS)


def _configs() -> list[Shown]:
    out = []
    for i, config in enumerate(_CONFIGS):
        for j, (before, after) in enumerate(_CONFIG_FRAMES):
            body = json.dumps(config, indent=2) if (i + j) % 2 else _j(config)
            out.append(Shown("config", before + _fence(body, ("json", "")[j % 2]) + after, _fitting(config)))
    return out


def _definitions() -> list[Shown]:
    """Function definitions (OpenAI's tool shape, a bare ``name``/``parameters`` one), shown or asked for."""
    out = []
    for name, schema in TOOLS.items():
        openai = {"type": "function", "function": {"name": name, "description": f"The {name} tool.",
                                                   "parameters": schema}}
        plain = {"name": name, "description": f"The {name} tool.", "parameters": schema}
        bare = {"name": name, "parameters": schema}
        out += [
            Shown("definition", _fence(json.dumps(openai, indent=2)), (name,)),
            Shown("definition", "Here is the function definition:\n" + _fence(_j(openai)), (name,)),
            Shown("definition", _fence(_j(plain)) + "\n\nRegister it with your client.", (name,)),
            Shown("definition", "The tool is declared like this:\n" + _fence(json.dumps(bare, indent=2)), (name,)),
            Shown("definition", _j(bare), (name,)),
            Shown("definition", _j({"type": "function", "function": {"name": name, "parameters": schema}}), (name,)),
        ]
    return out


def _code() -> list[Shown]:
    """List comprehensions, signatures and code that name a tool."""
    out = []
    for name, schema in TOOLS.items():
        first = next(iter(schema["properties"]))
        out += [
            Shown("comprehension", f"[{name}(c) for c in items]", (name,)),
            Shown("comprehension", f"[{name}({first}=x) for x in values]\n\nThat calls it once per value.", (name,)),
            Shown("comprehension", f"results = [{name}(x) for x in xs]", (name,)),
            Shown("code", "In Python:\n" + _fence(f"for x in xs:\n    print({name}({first}=x))", "python"),
                  (name,)),
            Shown("signature", f"{name}({first}) only takes a {first}; it cannot answer that.", (name,)),
            Shown("signature", f"{name}({', '.join(schema['properties'])}) is the signature.", (name,)),
        ]
    return out


def _tutorials() -> list[Shown]:
    """Tutorials and explanations of the call format itself."""
    out = []
    for name, args in _pairs()[::2]:
        placeholders = {key: f"<{key}>" for key in args}
        out += [
            Shown("tutorial", "To call a tool, the model writes an object with its name and arguments. For example:\n"
                  + _fence(_call(name, args)) + "\nThe client then runs it.", (name,)),
            Shown("tutorial", "The tool call format looks like this:\n" + _fence(_call(name, placeholders)), (name,)),
            Shown("tutorial", "Step 2: define the call. A sample invocation is:\n\n" + _call(name, args), (name,)),
            Shown("tutorial", "e.g.\n" + _fence(_call(name, args)) + "\n", (name,)),
            Shown("tutorial", f"Use the template below and fill in your values:\n" + _fence(_j(placeholders)),
                  (name,)),
        ]
    return out


def _refusals() -> list[Shown]:
    """Refusals and confirmations that show the call they would make."""
    out = []
    frames = [
        ("I won't do that unless you confirm. If you do, I'll call:\n", ""),
        ("I will not run this without your confirmation. The call would be:\n", "\nReply yes to proceed."),
        ("Sorry, I can't perform this action. For reference, it would look like:\n", ""),
        ("This is destructive, so I'm asking first. Should I run the following?\n", ""),
        ("I cannot access that service. Had I been able to, the request would be ", "."),
        ("Once you confirm, I will send:\n", ""),
    ]
    for i, (before, after) in enumerate(frames):
        for name, args in _pairs()[i % 2::2]:
            body = _call(name, args)
            out.append(Shown("refusal", before + (_fence(body) if i % 2 else body) + after, (name,)))
            out.append(Shown("refusal", before + _fence(_j(args)) + after, (name,)))
    return out


def _data() -> list[Shown]:
    """JSON data answers and BFCL irrelevance-style prose."""
    out = [
        Shown("data", "Here is the data you asked for:\n" + _fence(_j([{"id": 1, "city": "Oslo"}, {"id": 2}])),
              tuple(TOOLS)),
        Shown("data", _j({"status": "ok", "items": []}), tuple(TOOLS)),
        Shown("data", '[{"name": "Alice", "age": 30}, {"name": "Bob", "age": 25}]', tuple(TOOLS)),
        Shown("data", '{"name": "Alice", "email": "alice@example.com"}', ("create_user",)),
        Shown("data", "The result was:\n```\n" + _j({"temperature": 21, "unit": "c"}) + "\n```", ("get_weather",)),
    ]
    irrelevant = [
        "I'm sorry, but the provided function {name} cannot help with that question.",
        "None of the available functions can be used to answer this. {name} is for something else.",
        "The function `{name}` is not suitable here: the question does not ask for it.",
        "{name} is not relevant to this request.",
        "I don't have a tool for that. (The only tool, {name}, does something different.)",
        "There is no function that computes this; {name} requires different parameters.",
    ]
    for i, line in enumerate(irrelevant):
        for name in list(TOOLS)[i % 2::2]:
            out.append(Shown("irrelevance", line.format(name=name), (name,)))
    return out


#: Every answer that shows JSON or code without meaning a call.
SHOWN: list[Shown] = [*_docs(), *_configs(), *_definitions(), *_code(), *_tutorials(), *_refusals(), *_data()]


# answers that mean calls -----------------------------------------------------------------------------------

def _python_args(args: dict[str, Any]) -> str:
    return ", ".join(f"{key}={value!r}" if not isinstance(value, bool) else f"{key}={value}"
                     for key, value in args.items())


def _meant() -> list[Meant]:
    out: list[Meant] = []
    pairs = _pairs()
    for k, (name, args) in enumerate(pairs):
        other_name, other_args = pairs[(k + 5) % len(pairs)]
        both = (name, other_name)
        calls2 = ((name, args), (other_name, other_args))
        one = ((name, args),)
        out += [
            Meant("bare", _call(name, args), (name,), one),
            Meant("bare_lines", _call(name, args) + "\n" + _call(other_name, other_args), both, calls2),
            Meant("fence", _fence(_call(name, args)), (name,), one),
            Meant("fences", _fence(_call(name, args)) + "\n" + _fence(_call(other_name, other_args)), both, calls2),
            Meant("fences", _fence(_call(name, args)) + "\n\n" + _fence(_call(other_name, other_args), ""), both,
                  calls2),
            Meant("list", f"[{name}({_python_args(args)})]", (name,), one),
            Meant("list", f"[{name}({_python_args(args)}), {other_name}({_python_args(other_args)})]", both, calls2),
            Meant("list_lines", f"[{name}({_python_args(args)})]\n[{other_name}({_python_args(other_args)})]",
                  both, calls2),
            Meant("fence_after_prose", f"You can use the {name} tool. Here's how you would call it:\n"
                  + _fence(_call(name, args)), (name,), one, f"You can use the {name} tool. Here's how you would call it:\n"),
            Meant("fence_after_prose", "Sure! Let me do that.\n\n" + _fence(_call(name, args)), (name,), one,
                  "Sure! Let me do that.\n\n"),
            Meant("fence_after_prose", f"To answer this, I'll use {name}.\n" + _fence(_call(name, args))
                  + "\n" + _fence(_call(other_name, other_args)), both, calls2, f"To answer this, I'll use {name}.\n"),
            Meant("nameless", _j(args), (name,), one),
            Meant("nameless", _fence(_j(args)), (name,), one),
        ]
    # the issue's own example (bfcl.md): the one offered tool's arguments alone, in a fence
    out.append(Meant("nameless", '```json\n{"location": "London", "days": 3}\n```', ("get_weather",),
                     (("get_weather", {"location": "London", "days": 3}),)))
    return out


#: Every answer that means calls.
MEANT: list[Meant] = _meant()
