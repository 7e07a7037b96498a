"""Function tools the tests share, in the Responses API's flat shape (``{"type": "function", "name", …}``)."""

WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "Current weather for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
                   "additionalProperties": False},
}
TIME = {
    "type": "function",
    "name": "get_time",
    "description": "Current time in a time zone",
    "parameters": {"type": "object", "properties": {"tz": {"type": "string"}}, "required": ["tz"],
                   "additionalProperties": False},
}
STRICT_WEATHER = {**WEATHER, "strict": True}
STRICT_TIME = {**TIME, "strict": True}
