"""The regular expressions optiflow runs on Python's backtracking ``re``, each with why it runs in
linear time and, when it reads document text, the text-safety reader that exercises it
(:mod:`tests.security.text_readers`). ``tests/security/test_regex_inventory.py`` holds the code
to this list both ways: a new pattern fails until it is here, a stale entry fails until removed.

Keys are (module under ``optiflow.``, the top-level name the call is in, the pattern's literal
text or the source of the expression that builds it): :mod:`tests.security.regex_inventory`.

The arguments, in short. A pattern is linear when every position it starts from does bounded
work, or when the work from different starts covers disjoint text:

- *anchored*: ``^...$`` (or ``.match`` / ``.fullmatch``): one start;
- *one class*: a single character class, or a run of one, consumed once;
- *bounded*: every match and every failed attempt reads a bounded number of characters (literal
  alternatives, counted repeats);
- *disjoint runs*: an unbounded repeat is entered only right after a fixed lead-in the run cannot
  contain, so each run is read from one start (``\\n[ \\t]+File``, ``(?<=[.!?])\\s+``);
- *possessive*: ``\\d++`` or ``(?<!\\d)`` where giving characters back could never help.
"""

from __future__ import annotations

Key = tuple[str, str, str]
DOCUMENT, NAMES = "document text", "names"

LINEAR: dict[Key, tuple[str, str | None]] = {
    # -- admission, checks ---------------------------------------------------------------------
    ("admission", "_CONTROL", "[\\x00-\\x1f\\x7f-\\x9f]"): (
        "one class; names and sample ids only, at most MAX_NAME_LENGTH characters",
        None,
    ),
    ("core.checks", "_NUMBER", "-?\\d+(?:[.,]\\d+)?(?:[eE][-+]?\\d+)?"): (
        "search returns at the first digit: every part after it is a class run that cannot fail back",
        "check numeric",
    ),
    # -- compression ---------------------------------------------------------------------------
    ("core.compress.extract", "_BULLET", "^\\s*(?:[-*\\u2022]|\\d+[.)])\\s+"): (
        "anchored (.match on one line)",
        "extract.pieces",
    ),
    ("core.compress.extract", "_LINE_END", "[.!?:][\"')\\]]?\\s*$|[\"']\\s*$"): (
        "disjoint runs: \\s*$ is entered only after a sentence end or a quote",
        "extract.pieces",
    ),
    ("core.compress.extract", "chosen", "\\d+"): ("one class", "extract.chosen"),
    ("core.compress.rules", "_COMPILED", "f'\\\\b{p}'"): (
        "bounded: fixed phrases (FILLER_PHRASES); a trailing \\s+ is entered only after the phrase",
        "rules.compress_text",
    ),
    ("core.compress.rules", "_ANY_FILLER", "'|'.join((f'\\\\b{p}' for p, _ in FILLER_PHRASES))"): (
        "bounded: the alternation of the fixed phrases above",
        "rules.compress_text",
    ),
    ("core.compress.rules", "_SENTENCE", "(?<=[.!?])\\s+(?=\\S)"): (
        "disjoint runs: a run of blanks is entered only right after a sentence end",
        "rules.compress_text",
    ),
    ("core.compress.rules", "_PLACEHOLDER", "\\$\\{[A-Za-z_][A-Za-z0-9_]*\\}"): (
        "disjoint runs: the name run is entered only after '${', which it cannot contain",
        "rules.compress_text",
    ),
    ("core.compress.rules", "compress_text", "\\n{3,}"): ("one class", "rules.compress_text"),
    ("core.compress.rules", "compress_text", "[ \\t]+"): ("one class", "rules.compress_text"),
    ("core.compress.rules", "_drop_fillers", "[ \\t]{2,}"): ("one class", "rules.compress_text"),
    # -- faithfulness --------------------------------------------------------------------------
    ("core.faithfulness", "_WORD", "[^\\W\\d_][^\\W_]*|\\d+"): (
        "one class run per word, consumed once",
        "faithfulness.check (two texts)",
    ),
    ("core.faithfulness", "_Question", "\\b(?:do you|would you like|can you|could you) [^.?!]*\\?"): (
        "only .match on one lead-in-to-sentence-end window (_Question.search); never searched",
        "faithfulness.check (proposal)",
    ),
    ("core.faithfulness", "_Question", "\\b(?:do you|would you like|can you|could you) "): (
        "bounded: literal alternatives",
        "faithfulness.check (proposal)",
    ),
    ("core.faithfulness", "_Question", "[.?!]"): ("one class", "faithfulness.check (proposal)"),
    ("core.faithfulness", "_chat", "p"): (
        "the CHAT phrases other than the question: bounded literal alternatives, or anchored at ^",
        "faithfulness.check (proposal)",
    ),
    ("core.faithfulness", "mentioned", "f'(?<![\\\\w-]){re.escape(lab)}(?![\\\\w-])'"): (
        "bounded: one escaped label of at most 40 characters (labels_of)",
        "faithfulness.check (proposal)",
    ),
    (
        "core.reading",
        "_TOKEN",
        "\\$\\{\\w+\\}|\\{\\{ ?\\w+ ?\\}\\}|\\d+(?:[.,]\\d+)*[\\w%'\\u2019-]*|[^\\W\\d_][\\w'\\u2019-]*|[,;:\\\"\\u201c\\u201d()\\u2264\\u2265\\u2192]|[<>]=?",
    ): (
        "alternatives told apart by their first character; each a class run consumed once (a number's "
        "tail of letters is a class run after it: the match never fails, so never backtracks); a "
        "comparison sign is one or two characters (an arrow one); a {{placeholder}} a bounded lead-in and "
        "one class run",
        "provenance (two texts)",
    ),
    ("core.reading", "_THOUSANDS", "\\d{1,3}(?:,\\d{3})+"): (
        "fullmatch of one number token (at most a few dozen characters): a digit run, then fixed-width "
        "groups each opened by a comma",
        "provenance (two texts)",
    ),
    ("core.reading", "_RANGE", "(?<=\\w)\\u2013(?=\\w)"): (
        "one character between two fixed-width lookarounds: tried once per position",
        "provenance (two texts)",
    ),
    (
        "core.sentences",
        "_END",
        "\\n[ \\t]*(?:\\n|(?=[-*\\u2022][ \\t]|\\d{1,3}[.)][ \\t]|[A-Z][\\w ]{0,20}:))|(?:(?<=[.!?])|(?<=[.!?][\\\"')\\]\\u201d]))(?<!\\be\\.g\\.)(?<!\\bi\\.e\\.)(?<!\\bvs\\.)(?<!\\bincl\\.)(?<!\\bapprox\\.)[ \\t\\n]+(?![ \\t\\na-z\\u2192\\u21d2]|[-=]>)|(?<=;)[ \\t\\n]+(?![ \\t\\n])",
    ): (
        "starts only at a line break (its blank run scanned once; a lookahead of at most 22 "
        "characters for a 'Word:' line) or after a fixed-width lookbehind "
        "(a sentence end or ';', then fixed-width negative lookbehinds for 'e.g.', 'i.e.', 'vs.', "
        "'incl.', 'approx.'), one blank run each, then a fixed-width negative lookahead (not a "
        "lowercase letter nor an arrow)",
        "provenance (two texts)",
    ),
    # -- optimizers ----------------------------------------------------------------------------
    ("core.optimize.document", "_UNSAFE", "[^A-Za-z0-9_.\\-]+"): (
        "one class; use-case and experiment names",
        None,
    ),
    ("core.optimize.params", "_NAME", "^[A-Za-z_][A-Za-z0-9_]*$"): ("anchored; parameter names", None),
    (
        "core.optimize.params",
        "ParameterBlockSpec",
        "f'^(?P<lead>[ \\\\t]*(?:[-*][ \\\\t]*)?){re.escape(name)}(?P<sep>[ \\\\t]*:[ \\\\t]*)"
        "(?P<value>(?:[^\\\\n#]*[^\\\\n# \\\\t])?)(?P<trail>[ \\\\t]*(?:#[^\\\\n]*)?)$'",
    ): (
        "one attempt per line start; once the name and ':' match it cannot fail (greedy value, no lazy split)",
        "params: block parse",
    ),
    # -- prompts, names --------------------------------------------------------------------------
    ("core.overrides", "_TAG", "^[A-Za-z0-9_.\\-]{1,128}$"): ("anchored, bounded; tags", None),
    ("core.overrides", "_SEMVER", "^v(\\d+)\\.(\\d+)\\.(\\d+)$"): ("anchored; versions", None),
    ("core.prompt", "_PARAM", "\\$\\{([A-Za-z_][A-Za-z0-9_]*)\\}"): (
        "disjoint runs: the name run is entered only after '${'",
        "prompt.template_params",
    ),
    ("core.rate_limits", "_NAME", "^[^\\s{}]{1,200}$"): ("anchored, bounded; route names in settings", None),
    ("core.relevance", "_SENTENCE_END", "(?<=[.!?])\\s+"): (
        "disjoint runs: a run of blanks is entered only right after a sentence end",
        "relevance.probe",
    ),
    ("core.relevance", "_WORD", "[^\\W_]+"): ("one class", "relevance.probe"),
    ("core.sections", "NAME", "^[A-Za-z0-9_.\\-]+$"): ("anchored, one class", "sections.parse_path"),
    # -- errors, files, interfaces -------------------------------------------------------------
    ("errors", "_TRACEBACK", 'Traceback \\(most recent call last\\)|\\n[ \\t]+File \\"'): (
        "disjoint runs: [ \\t]+ is entered only after a newline, which it cannot contain",
        "errors.public_message",
    ),
    (
        "errors",
        "_PATH",
        "(?<![\\w:/.~-])(?:[A-Za-z]:)?[\\\\/](?:[\\w.@+~-]+[\\\\/])+(?P<name>[\\w.@+~-]*)",
    ): (
        "starts only at a separator no path character precedes; the parts then match without backtracking",
        "errors.public_message",
    ),
    ("files", "_LONG_BLANK", "(?<![ \\t\\r\\n])[ \\t\\r\\n]{256}"): (
        "starts only where a run of blanks starts, reads at most 256 of it",
        "files.read_yaml",
    ),
    ("interfaces.cli._common", "_CONTROL", "[\\x00-\\x08\\x0b-\\x1f\\x7f-\\x9f]"): (
        "one class",
        "cli.printable",
    ),
    ("interfaces.cli.cron", "job_name", "[^A-Za-z0-9_.-]+"): ("one class; job names", None),
    ("interfaces.cli.replay", "_JOB_ID", "^[A-Za-z0-9_.\\-]{1,64}$"): ("anchored, bounded; job ids", None),
    (
        "interfaces.cli.serve",
        "_HOSTNAME",
        "^(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}"
        "[A-Za-z0-9])?)*$",
    ): ("anchored, and the lookahead caps it at 253 characters; a CLI argument", None),
    ("interfaces.console", "boxed", "\\s{3,}"): ("one class", "console.boxed"),
    ("interfaces.http.api", "JOB_ID", "^[A-Za-z0-9_.\\-]{1,64}$"): ("anchored, bounded; URL parts", None),
    ("interfaces.http.api", "_NAME", "^[A-Za-z0-9_.\\-]+$"): ("anchored, one class; query arguments", None),
    # -- llm -----------------------------------------------------------------------------------
    ("llm.proposal", "_FENCE", "^```[A-Za-z0-9_-]*\\s*\\n(.*?)\\n?```\\s*$"): (
        "anchored (.match): one start; the lazy body tries the closing fence once per position",
        "compress.clean_output",
    ),
    (
        "llm.judge",
        "_KEYED",
        'f"""(?:score|rating|grade)[\\\\"\'*]*+\\\\s*+(?:(?:[:=]|\\\\bis\\\\b|\\\\bof\\\\b)\\\\s*+)?{_NUM}'
        '(?:\\\\s*+(?:/|out of)\\\\s*+{_NUM})?"""',
    ): ("possessive runs after a fixed keyword; numbers start at a run's start", "judge.parse_score"),
    ("llm.judge", "_FRACTION", "f'{_NUM}\\\\s*(?:/|out of)\\\\s*{_NUM}'"): (
        "numbers start at a run's start, possessive: each run and the blanks after it read once",
        "judge.parse_score",
    ),
    ("llm.judge", "_PERCENT", "f'{_NUM}\\\\s*%'"): ("as _FRACTION", "judge.parse_score"),
    ("llm.judge", "_BARE", "_NUM"): ("as _FRACTION; search returns at the first number", "judge.parse_score"),
    ("llm.judge", "_PASS_WORDS", "\\b(pass(?:ed|es)?|yes|correct)\\b"): (
        "bounded: literal words",
        "judge.parse_score",
    ),
    ("llm.judge", "_FAIL_WORDS", "\\b(fail(?:ed|s|ure)?|incorrect|wrong)\\b"): (
        "bounded: literal words",
        "judge.parse_score",
    ),
    ("llm.limiter", "_DURATION", "(\\d+(?:\\.\\d+)?)(ms|h|m|s)"): (
        "settings (OPTIFLOW_MODEL_LIMITS), not documents",
        None,
    ),
    (
        "llm.noise",
        "_COMPONENT",
        "^\\s*(?:(?P<w>\\d+(?:\\.\\d+)?)\\s*\\*\\s*)?(?P<kind>beta|fixed)\\s*\\(\\s*(?P<args>[^)]*)\\)\\s*$",
    ): ("anchored (.match on one component of sim_pass_dist)", "sim: pass_dist"),
    # -- the simulated model: RULE_RE, HINT_RE, POLICY_RE and DEFAULT_RE are only .match'ed on one
    # lead-in-to-tail window found by _scan (test_round2's differential test); the rest below
    (
        "llm.simulated",
        "RULE_RE",
        (
            "(?i:\\bwhen\\s+(?:a|an|the)\\s+(?:customer|user|client|caller)\\s+(?:asks|writes|enquires|inquires)\\s+"
            "(?:us\\s+)?(?:about|regarding)\\s+)(?P<topic>[^,.;:!?]+?)\\s*,[^.!?]*?(?i:\\b(?:reply|respond|answer)"
            "\\s+with\\s+(?:the\\s+)?(?:code|label)\\s+)(?P<label>[A-Z][A-Z0-9]*(?:[-_][A-Z0-9]+)*)\\b"
        ),
    ): ("only .match on one window found by _scan (linear)", "sim: answer (system)"),
    (
        "llm.simulated",
        "_SENTENCE_SPLIT",
        "(?<=[.!?])\\s+|\\n\\s*\\n|\\n(?=[ \\t]*(?:[-*\\u2022]|\\d+[.)])\\s)",
    ): ("disjoint runs: each blank run is entered after a sentence end or a newline", "sim: compress"),
    ("llm.simulated", "_WORD", "[a-z0-9]+"): ("one class", "sim: answer (user)"),
    (
        "llm.simulated",
        "HINT_RE",
        "'(?i:\\\\bquestions?\\\\s+(?:about|regarding|on)\\\\s+)(?P<topic>[^,.;:!?]+?)\\\\s+(?i:(?:are|is)\\\\s+"
        "(?:filed|handled|logged|tracked|routed)\\\\s+(?:under|as|with)\\\\s+)(?:(?i:(?:the\\\\s+)?(?:code|label)"
        "\\\\s+))?' + _LABEL",
    ): ("only .match on one window found by _scan (linear)", "sim: rewrite"),
    (
        "llm.simulated",
        "POLICY_RE",
        "'(?i:\\\\bwhen\\\\s+(?:the\\\\s+)?)(?P<metric>[A-Za-z_][A-Za-z0-9_]*)\\\\s+(?i:is)\\\\s+(?P<op>(?i:below|"
        "under|above|over|at\\\\s+least|at\\\\s+most))\\\\s+(?P<ref>-?\\\\d+(?:\\\\.\\\\d+)?|[A-Za-z_][A-Za-z0-9_]*)"
        "\\\\s*,[^.!?]*?' + _REPLY_WITH + _LABEL",
    ): ("only .match on one window found by _scan (linear)", "sim: answer (system)"),
    ("llm.simulated", "DEFAULT_RE", "'(?i:\\\\botherwise\\\\b)[^.!?]*?' + _REPLY_WITH + _LABEL"): (
        "only .match on one window found by _scan (linear)",
        "sim: answer (system)",
    ),
    (
        "llm.simulated",
        "PARAM_RE",
        "^[ \\t]*(?:[-*][ \\t]*)?(?P<name>[A-Za-z_][A-Za-z0-9_]*)[ \\t]*:[ \\t]*(?P<value>-?\\d+(?:\\.\\d+)?|"
        "\\[[^\\]\\n]*\\])[ \\t]*(?:#[^\\n]*)?$",
    ): (
        "one attempt per line start (re.M); its repeats are separated by fixed ':' and value forms",
        "sim: answer (system)",
    ),
    (
        "llm.simulated",
        "_OBSERVATION",
        "\\b(?P<name>[A-Za-z_][A-Za-z0-9_]*)\\s*[=:]\\s*(?P<value>-?\\d+(?:\\.\\d+)?)\\b",
    ): ("starts only at a word start; the blank runs are read after a whole word", "sim: answer (user)"),
    ("llm.simulated", "_VARIANT", "<variant>(\\d+)</variant>"): (
        "bounded lead-in, then one class",
        "sim: rewrite",
    ),
    ("llm.simulated", "_SEGMENT_END", "[!?]|\\.(?!\\d)"): ("bounded", "sim: answer (system)"),
    ("llm.simulated", "_REPLY_TAIL", "_REPLY_WITH + _LABEL"): (
        "a fixed lead-in ('reply with code'), then one label run",
        "sim: answer (system)",
    ),
    (
        "llm.simulated",
        "_RULE_LEAD",
        "(?i:\\bwhen\\s+(?:a|an|the)\\s+(?:customer|user|client|caller)\\s+(?:asks|writes|enquires|inquires)\\s+"
        "(?:us\\s+)?(?:about|regarding)\\s+)",
    ): ("words separated by blank runs: each run read once after a word", "sim: answer (system)"),
    ("llm.simulated", "_POLICY_LEAD", "(?i:\\bwhen\\s+)"): (
        "bounded lead-in, then one class",
        "sim: answer (system)",
    ),
    ("llm.simulated", "_DEFAULT_LEAD", "(?i:\\botherwise\\b)"): ("bounded", "sim: answer (system)"),
    ("llm.simulated", "_HINT_LEAD", "(?i:\\bquestions?\\s+(?:about|regarding|on)\\s+)"): (
        "words separated by blank runs",
        "sim: rewrite",
    ),
    (
        "llm.simulated",
        "_HINT_TAIL",
        "'(?<=\\\\s)(?i:(?:are|is)\\\\s+(?:filed|handled|logged|tracked|routed)\\\\s+(?:under|as|with)\\\\s+)"
        "(?:(?i:(?:the\\\\s+)?(?:code|label)\\\\s+))?' + _LABEL",
    ): ("words separated by blank runs, then one label run", "sim: rewrite"),
    ("llm.simulated", "_TOPIC_STOP", "[,.;:]"): ("one class", "sim: rewrite"),
    ("llm.simulated", "_POLICY_STOP", "[,;:]|\\.(?!\\d)"): ("bounded", "sim: answer (system)"),
    ("llm.simulated", "_DOT", "\\."): ("one character", "sim: answer (system)"),
    ("llm.simulated", "_NUMBERED", "^\\[(\\d+)\\] (.*)$"): (
        "one attempt per line start (re.M)",
        "sim: extract",
    ),
    ("llm.simulated", "policy_decision", "^-?\\d"): (
        "anchored (re.match): reads at most two characters",
        None,
    ),
    # -- settings, stores ------------------------------------------------------------------------
    ("settings", "load_settings", 'field "(\\w+)"'): (
        "pydantic-settings' own error message, not documents",
        None,
    ),
    ("stores._common", "_NAME", "^[A-Za-z0-9_.\\-]{1,128}$"): ("anchored, bounded; store names", None),
}
"""Every ``re`` pattern in ``optiflow/``: (why it is linear, the reader that exercises it or None
when it never reads document text)."""

TEMPLATE_USES: dict[str, str] = {
    "optiflow.admission": "admission.check_templates",
    "optiflow.core.prompt": "prompt.render (body)",
    "optiflow.llm.proposal": "compress.guard_placeholders",
    "optiflow.core.optimize.demonstrations": "demonstrations: template",
}
"""Modules that use ``string.Template`` (whose own pattern (``\\$(?:(\\$)|(name)|{(name)}|())`` is bounded
after each ``$``) on document text, and the reader that exercises it."""

__all__ = ["LINEAR", "TEMPLATE_USES"]
