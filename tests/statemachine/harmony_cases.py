"""gpt-oss Harmony output cases mined from the peers' suites; the texts are theirs, the structure ours.

Each case is ``(source, label, text, expected, options)``: ``expected`` in the
harness's items (``str`` content, ``Reasoning``, ``Call``, ``Open``), options
for :func:`harness.tr` (``finish``, ``notes``, ``leak_ok``) and ``config``
(``"none"``: the tools are offered with ``tool_choice: "none"``, the peers'
"do not parse tool calls").

Sources (repository, file, commit):

* ``llama.cpp``: ggml-org/llama.cpp ``tests/test-chat.cpp`` @ e7e21164bdf5434e3453777fd27e68cdc0ebfe94
  (the ``openai-gpt-oss-120b.jinja`` block; the two ``reasoning_format`` NONE /
  ``reasoning_in_content`` cases are not transcribed: toolwire always splits reasoning off).
* ``vllm-harmony``: vllm-project/vllm ``tests/parser/test_harmony.py`` @ 06cbadc2c809be0d442da52380453f6bb69e766a
  (``TestParse``, ``TestParseDelta``); cases built there from ``openai_harmony`` messages are written as
  the Harmony encoder renders them (``<|channel|>C[ to=R][ <|constrain|>json]<|message|>…<|end|>`` or
  ``<|call|>``; later messages after ``<|start|>assistant``).
* ``vllm-openai``: vllm-project/vllm ``tests/tool_parsers/test_openai_tool_parser.py``
  @ 15c99cb111e626d885d7f54a0b57dc9ff10168db.
* ``sglang``: sgl-project/sglang ``test/registered/unit/function_call/test_gptoss_detector.py``
  @ 972e9107c3845b4147dc1e0dbecd021353536232.
* ``ollama``: ollama/ollama ``harmony/harmonyparser_test.go`` @ 09ccded8b5630019de707feb83c98dd74b4c381c
  (its header cases become messages with ``{"x": 1}`` arguments).
"""

from __future__ import annotations

from harness import Call, Open, Reasoning

THINK = "<|channel|>analysis<|message|>I'm\nthinking<|end|>"
HELLO = "Hello, world!\nWhat's up?"
SF = "<|start|>assistant<|channel|>commentary to=functions.special_function"
TOKYO = '{"location": "Tokyo"}'


def call(recipient: str, args: str, channel: str = "commentary", *, json: bool = True, first: bool = False,
         end: str = "<|call|>") -> str:
    """One call message as the Harmony encoder renders it."""
    start = "" if first else "<|start|>assistant"
    constrain = " <|constrain|>json" if json else ""
    return f"{start}<|channel|>{channel} to={recipient}{constrain}<|message|>{args}{end}"


def msg(channel: str, text: str, *, first: bool = False, end: str = "<|end|>") -> str:
    """One message without a recipient."""
    return f"{'' if first else '<|start|>assistant'}<|channel|>{channel}<|message|>{text}{end}"


UNCLOSED = {"notes": ["recovered_unclosed"], "finish": "tool_calls"}
CALLS = {"finish": "tool_calls"}

CASES = [
    # llama.cpp tests/test-chat.cpp (gpt-oss) ---------------------------------------------------
    ("llama.cpp", "analysis cut short", "<|channel|>analysis<|message|>I'm\nthink", [Reasoning("I'm\nthink")], {}),
    ("llama.cpp", "analysis only", THINK, [Reasoning("I'm\nthinking")], {}),
    ("llama.cpp", "analysis then final", THINK + "<|start|>assistant<|channel|>final<|message|>" + HELLO,
     [Reasoning("I'm\nthinking"), HELLO], {}),
    ("llama.cpp", "call cut inside its arguments",
     THINK + SF + ' <|constrain|>json<|message|>{"arg1',
     [Reasoning("I'm\nthinking"), Open("special_function", '{"arg1')],
     {"notes": ["incomplete"]}),
    ("llama.cpp", "call without constrain, cut", THINK + SF + '<|message|>{"arg1',
     [Reasoning("I'm\nthinking"), Open("special_function", '{"arg1')], {"notes": ["incomplete"]}),
    ("llama.cpp", "call without <|call|>", THINK + SF + ' <|constrain|>json<|message|>{"arg1": 1}',
     [Reasoning("I'm\nthinking"), Call("special_function", '{"arg1": 1}')], UNCLOSED),
    ("llama.cpp", "call on the analysis channel",
     THINK + '<|start|>assistant<|channel|>analysis to=functions.special_function <|constrain|>json<|message|>'
             '{"arg1": 1}', [Reasoning("I'm\nthinking"), Call("special_function", '{"arg1": 1}')], UNCLOSED),
    ("llama.cpp", "commentary preamble", THINK + "<|start|>assistant<|channel|>commentary<|message|>" + HELLO,
     [Reasoning("I'm\nthinking"), HELLO], {}),
    ("llama.cpp", "preamble then call",
     THINK + "<|start|>assistant<|channel|>commentary<|message|>" + HELLO + "<|end|>" + SF
     + ' <|constrain|>json<|message|>{"arg1": 1}',
     [Reasoning("I'm\nthinking"), HELLO, Call("special_function", '{"arg1": 1}')], UNCLOSED),
    ("llama.cpp", "tool calls not parsed: final", THINK + "<|start|>assistant<|channel|>final<|message|>" + HELLO,
     [Reasoning("I'm\nthinking"), HELLO], {"config": "none"}),
    ("llama.cpp", "tool calls not parsed: call cut", THINK + SF + '<|message|>{"arg1',
     [Reasoning("I'm\nthinking")], {"config": "none", "notes": ["suppressed"]}),
    ("llama.cpp", "tool calls not parsed: call", THINK + SF + ' <|constrain|>json<|message|>{"arg1": 1}',
     [Reasoning("I'm\nthinking")], {"config": "none", "notes": ["recovered_unclosed", "suppressed"]}),
    ("llama.cpp", "recipient in the role header",
     ' to=functions.special_function<|channel|>commentary <|constrain|>json<|message|>{"arg1": 1}',
     [Call("special_function", '{"arg1": 1}')], UNCLOSED),
    ("llama.cpp", "recipient in the role header, analysis",
     ' to=functions.special_function<|channel|>analysis <|constrain|>json<|message|>{"arg1": 1}',
     [Call("special_function", '{"arg1": 1}')], UNCLOSED),
    ("llama.cpp", "recipient before the channel",
     THINK + '<|start|>assistant to=functions.special_function<|channel|>analysis <|constrain|>json<|message|>'
             '{"arg1": 1}', [Reasoning("I'm\nthinking"), Call("special_function", '{"arg1": 1}')], UNCLOSED),

    # vLLM tests/parser/test_harmony.py ------------------------------------------------------------
    ("vllm-harmony", "reasoning only", msg("analysis", "This is reasoning", first=True),
     [Reasoning("This is reasoning")], {}),
    ("vllm-harmony", "content only", msg("final", "This is a test", first=True), ["This is a test"], {}),
    ("vllm-harmony", "reasoning and content",
     msg("analysis", "I should think first.", first=True) + msg("final", "The answer is 4."),
     [Reasoning("I should think first."), "The answer is 4."], {}),
    *[("vllm-harmony", f"single call on {channel}, {label}",
       call("functions.get_current_weather", args, channel, first=True),
       [Call("get_current_weather", {"location": "Tokyo"})], CALLS)
      for channel in ("commentary", "analysis")
      for label, args in (("flat", TOKYO), ("lines", '{\n"location": "Tokyo"\n}'))],
    ("vllm-harmony", "six calls of varied forms",
     call("functions.get_current_weather", TOKYO, first=True) + call("functions.get_user_location", TOKYO)
     + call("functions.no_content_type", TOKYO, json=False)
     + call("functions.not_json_no_content_type", "foo", json=False)
     + call("functions.empty_args", "{}") + call("functions.no_args", ""),
     [Call("get_current_weather", TOKYO), Call("get_user_location", TOKYO), Call("no_content_type", TOKYO),
      "<|start|>assistant<|channel|>commentary to=functions.not_json_no_content_type<|message|>foo<|call|>",
      Call("empty_args", "{}"), Call("no_args", "{}")],
     {"leak_ok": True, "notes": ["invalid_json", "repaired"], "finish": "tool_calls"}),
    ("vllm-harmony", "bare recipient", call("get_current_weather", TOKYO, first=True),
     [Call("get_current_weather", TOKYO)], CALLS),
    ("vllm-harmony", "two bare recipients",
     call("get_current_weather", TOKYO, first=True) + call("get_user_location", "{}"),
     [Call("get_current_weather", TOKYO), Call("get_user_location", "{}")], CALLS),
    ("vllm-harmony", "to=assistant is no call",
     call("assistant", "Some tool response", json=False, first=True) + msg("final", "Here is the answer"),
     ["Here is the answer"], {}),
    ("vllm-harmony", "dotted name", call("math.sum", '{"a": 2, "b": 3}', first=True),
     [Call("math.sum", '{"a": 2, "b": 3}')], CALLS),
    ("vllm-harmony", "reasoning, call, final",
     msg("analysis", "User asked about the weather.", first=True) + call("functions.get_current_weather", TOKYO)
     + msg("final", "This tool call will get the weather."),
     [Reasoning("User asked about the weather."), Call("get_current_weather", TOKYO),
      "This tool call will get the weather."], CALLS),
    ("vllm-harmony", "interrupted first message", "<|channel|>final<|message|>I'm in the middle of answering",
     ["I'm in the middle of answering"], {}),
    ("vllm-harmony", "interrupted reasoning", "<|channel|>analysis<|message|>I'm in the middle of thinking",
     [Reasoning("I'm in the middle of thinking")], {}),
    ("vllm-harmony", "truncated output",
     "<|channel|>analysis<|message|>I'm thinking.<|end|><|start|>assistant<|channel|>final<|message|>"
     "I'm in the middle of answering", [Reasoning("I'm thinking."), "I'm in the middle of answering"], {}),
    ("vllm-harmony", "commentary preamble", "<|channel|>commentary<|message|>I'll search for that",
     ["I'll search for that"], {}),
    ("vllm-harmony", "preamble then final",
     "<|channel|>commentary<|message|>Let me look that up.<|end|>"
     "<|start|>assistant<|channel|>final<|message|>The answer is 42.<|end|>",
     ["Let me look that up.\nThe answer is 42."], {}),
    ("vllm-harmony", "preamble, then a call with the recipient first",
     '<|channel|>commentary<|message|>Let me check the weather.<|end|><|start|>assistant to=functions.get_weather'
     '<|channel|>commentary<|message|>{"location": "SF"}<|end|>',
     ["Let me check the weather.", Call("get_weather", '{"location": "SF"}')], CALLS),
    *[("vllm-harmony", f"call split across deltas, {channel}",
       "<|channel|>analysis<|message|>Thinking<|end|><|start|>assistant to=functions.get_weather"
       f'<|channel|>{channel}<|constrain|>json<|message|>{{"location": "Paris"}}<|call|>',
       [Reasoning("Thinking"), Call("get_weather", '{"location": "Paris"}')], CALLS)
      for channel in ("commentary", "analysis")],
    ("vllm-harmony", "cross channel with a call",
     "<|channel|>analysis<|message|>Reasoning about query...<|end|><|start|>assistant to=functions.search"
     '<|channel|>commentary<|constrain|>json<|message|>{"query": "vllm"}<|call|>'
     "<|start|>assistant<|channel|>final<|message|>Done",
     [Reasoning("Reasoning about query..."), Call("search", '{"query": "vllm"}'), "Done"], CALLS),
    ("vllm-harmony", "call indices across calls",
     "<|channel|>analysis<|message|>Thinking<|end|><|start|>assistant to=functions.get_weather<|channel|>commentary"
     '<|constrain|>json<|message|>{"location": "Paris"}<|call|><|start|>assistant to=functions.get_time'
     '<|channel|>commentary<|constrain|>json<|message|>{"timezone": "UTC"}<|call|>',
     [Reasoning("Thinking"), Call("get_weather", '{"location": "Paris"}'), Call("get_time", '{"timezone": "UTC"}')],
     CALLS),
    ("vllm-harmony", "calls interleaved with a final message",
     "<|channel|>analysis<|message|>Plan<|end|><|start|>assistant to=functions.tool_a<|channel|>commentary"
     '<|constrain|>json<|message|>{"a": 1}<|call|><|start|>assistant to=functions.tool_b<|channel|>commentary'
     '<|constrain|>json<|message|>{"b": 2}<|call|><|start|>assistant<|channel|>final<|message|>Done<|end|>'
     '<|start|>assistant to=functions.tool_c<|channel|>commentary<|constrain|>json<|message|>{"c": 3}',
     [Reasoning("Plan"), Call("tool_a", '{"a": 1}'), Call("tool_b", '{"b": 2}'), "Done", Call("tool_c", '{"c": 3}')],
     UNCLOSED),
    ("vllm-harmony", "built-in recipient: assistant", call("assistant", "Ignore this", json=False, first=True), [], {}),
    ("vllm-harmony", "built-in recipient: browser (not offered)",
     call("browser", "Ignore this", json=False, first=True),
     ["<|channel|>commentary to=browser<|message|>Ignore this<|call|>"],
     {"leak_ok": True, "notes": ["unknown_tool"]}),

    # vLLM tests/tool_parsers/test_openai_tool_parser.py -------------------------------------------
    ("vllm-openai", "no tools called", msg("final", "This is a test", first=True), ["This is a test"], {}),
    ("vllm-openai", "call with final content",
     msg("analysis", 'User asks: "What is the weather in Tokyo?" based on their location. We need to use '
                     "get_current_weather tool and get_user_location tool.", first=True)
     + call("functions.get_current_weather", TOKYO) + msg("final", "This tool call will get the weather."),
     [Reasoning('User asks: "What is the weather in Tokyo?" based on their location. We need to use '
                "get_current_weather tool and get_user_location tool."),
      Call("get_current_weather", TOKYO), "This tool call will get the weather."], CALLS),

    # SGLang test_gptoss_detector.py ----------------------------------------------------------------
    ("sglang", "single call",
     '<|start|>assistant<|channel|>commentary to=functions.get_weather<|constrain|>json<|message|>{"city":"Beijing"}'
     "<|call|>", [Call("get_weather", '{"city":"Beijing"}')], CALLS),
    ("sglang", "text before the call",
     'Let me check.<|start|>assistant<|channel|>commentary to=functions.get_weather<|constrain|>json<|message|>'
     '{"city":"Beijing"}<|call|>', ["Let me check.", Call("get_weather", '{"city":"Beijing"}')], CALLS),
    ("sglang", "no call", "The weather is nice today.", ["The weather is nice today."], {}),
    ("sglang", "two calls",
     '<|start|>assistant<|channel|>commentary to=functions.get_weather<|constrain|>json<|message|>{"city":"Beijing"}'
     '<|call|><|start|>assistant<|channel|>commentary to=functions.search<|constrain|>json<|message|>'
     '{"query":"restaurants"}<|call|>',
     [Call("get_weather", '{"city":"Beijing"}'), Call("search", '{"query":"restaurants"}')], CALLS),
    ("sglang", "text then call, streamed",
     "I'll look that up. <|start|>assistant<|channel|>commentary to=functions.get_weather<|constrain|>json<|message|>"
     '{"city":"Beijing", "unit":"celsius"}<|call|>',
     ["I'll look that up. ", Call("get_weather", '{"city":"Beijing", "unit":"celsius"}')], CALLS),

    # Ollama harmony/harmonyparser_test.go ---------------------------------------------------------
    *[("ollama", f"header {header!r}", f"<|start|>{header}<|message|>" + '{"x": 1}<|call|>',
       [Call("get_weather", '{"x": 1}')], CALLS)
      for header in ("assistant<|channel|>analysis to=functions.get_weather",
                     "assistant to=functions.get_weather<|channel|>analysis",
                     "assistant to=functions.get_weather abc<|channel|>analysis",
                     "assistant<|channel|>commentary to=functions.get_weather <|constrain|>json",
                     "assistant to=functions.get_weather<|channel|>commentary <|constrain|>json",
                     "assistant<|channel|>commentary to=functions.get_weather<|constrain|>json",
                     "assistant to=functions.get_weather<|channel|>commentary<|constrain|>json")],
    ("ollama", "header without a role",
     '<|start|>to=functions.get_weather<|channel|>analysis<|message|>{"x": 1}<|call|>',
     [Call("get_weather", '{"x": 1}')], CALLS),
    ("ollama", "analysis header", "<|start|>assistant<|channel|>analysis<|message|>What is 2 + 2?<|end|>",
     [Reasoning("What is 2 + 2?")], {}),
    ("ollama", "a tool's reply after the call is dropped",
     '<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>'
     '{"location":"San Francisco"}<|call|><|start|>functions.get_weather to=assistant<|message|>'
     '{"sunny": true, "temperature": 20}<|end|>', [Call("get_weather", '{"location":"San Francisco"}')], CALLS),
    ("ollama", "implicit start, analysis, then a call",
     '<|channel|>analysis<|message|>User asks weather in SF. We need location. Use get_current_weather with location '
     '"San Francisco, CA".<|end|><|start|>assistant<|channel|>commentary to=functions.get_current_weather '
     '<|constrain|>json<|message|>{"location":"San Francisco, CA"}<|call|>',
     [Reasoning('User asks weather in SF. We need location. Use get_current_weather with location '
                '"San Francisco, CA".'), Call("get_current_weather", '{"location":"San Francisco, CA"}')], CALLS),
    ("ollama", "a tag that looks like an end but is not", "<|start|>user<|message|>test<|example|>more<|end|>",
     ["test<|example|>more"], {}),
    ("ollama", "messages without a channel",
     "<|start|>user<|message|>Hello<|end|><|start|>assistant<|message|>Hi!<|end|>",
     ["Hello\nHi!"], {}),
]

#: Every tool the cases call.
TOOL_NAMES = ("special_function", "get_current_weather", "get_user_location", "no_content_type",
              "not_json_no_content_type", "empty_args", "no_args", "math.sum", "get_weather", "get_time", "search",
              "tool_a", "tool_b", "tool_c")
