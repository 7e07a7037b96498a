"""Tools a request names that the model is not offered, since the provider would run them (hosted tools:
Responses' ``web_search``, Anthropic's ``web_search_…``, Google's ``googleSearch``…). A dropped tool is visible
without being noisy: counted in ``toolwire_dropped_tools_total``, named on the request's access line
(``dropped_tools``), logged at debug each request and warned about once per type and worker."""

from __future__ import annotations

import logging
from collections.abc import Collection

from . import metrics
from . import record as observe


class DroppedTools:
    """One API's record of its dropped tools.

    Args:
        log: the API's logger.
        known: the tool types that label the metric; any other counts as ``other`` (bounded labels, never a
            client's word).
        whose: who would run them, for the warning ("OpenAI", "Anthropic", "Google").
    """

    __slots__ = ("_log", "_known", "_whose", "warned")

    def __init__(self, log: logging.Logger, known: Collection[str], whose: str):
        self._log = log
        self._known = frozenset(known)
        self._whose = whose
        self.warned: set[str] = set()  # the labels this worker has warned about

    def note(self, kinds: list[str]) -> None:
        """The request's tools of these ``kinds`` were not offered to the model."""
        if not kinds:
            return
        labels = [kind if kind in self._known else "other" for kind in kinds]
        for label in labels:
            metrics.child(metrics.DROPPED_TOOLS, label).inc()
        self._log.debug("tools not offered to the model (run by the provider, not runnable here): %s",
                        ", ".join(kinds))
        observe.note_dropped_tools(labels)
        for label in dict.fromkeys(labels):
            if label not in self.warned:
                self.warned.add(label)
                self._log.warning("tool type %r is dropped from requests: %s would run it, and the model behind "
                                  "this server can only call tools the client runs (toolwire_dropped_tools_total "
                                  "counts them; said once per worker)", label, self._whose)
