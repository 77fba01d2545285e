"""Tool search: rank the tools of many servers for a request written the way people write.

Two signals, combined (docs/tools.md, *How the ranker works*):

* **Semantic**: the cosine between the request's embedding and each of three embeddings of the
  tool, averaged: the tool as a whole (its title or name, description, parameters and server),
  its name alone with its server's (``github: list pull requests``), and its description under its
  name; from the embedding model of :mod:`boocode.tools.embedding` when it is installed, so
  requests that share no word with the tool's text still find it. The request is embedded as what
  someone wants to do (``REQUEST_FRAME``), without the values it carries (quoted text, paths, URLs,
  identifiers): they say what to act on, not what to do, and pull it towards tools that merely
  mention a similar value.
* **Lexical**: BM25 over a tool's fields, each weighted by what it says about the tool: its name
  split into words (``get_issue_comments``, ``listPullRequests`` → get issue comments, list pull
  requests) and title weigh most, then the server's name, the description, the parameters' names
  and descriptions and the server's own description. Words are lower-cased, stemmed lightly
  (plurals, -ing, -ed) and stop words dropped.

The score is the semantic score plus ``LEXICAL_WEIGHT`` times the lexical score (scaled into 0..1
by ``LEXICAL_SCALE``), plus ``RECENT_BONUS`` for tools the conversation used recently. The
answer is "no tool fits", an empty list rather than a guess, when the best tool's evidence is
weak: its semantic score plus ``NO_FIT_LEXICAL`` times the best lexical score is under
``NO_FIT``. Without the model the lexical score alone decides, with ``NO_FIT_WORDS`` as its floor.
A tool whose score is 0 (or less) is never returned, even to fill the list.

An :class:`Index` is built once for a set of tools (their embeddings cached by text, so a list
change embeds only the tools that changed) and answers queries in a few milliseconds.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import math
import re
import threading
from collections import OrderedDict, defaultdict
from collections.abc import Iterable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from django.conf import settings

from boocode.extras import missing

if TYPE_CHECKING:
    from boocode.tools import embedding


def _embedding() -> Any:
    """:mod:`boocode.tools.embedding`, imported with the first index built, not at start-up:
    it imports numpy and the model's packages (about 20 MB and 0.1 s), which a process whose
    agents never search does without."""
    from boocode.tools import embedding

    return embedding


logger = logging.getLogger(__name__)


@functools.cache
def _model_installed() -> bool:
    return not missing("semantic")


def by_meaning() -> bool:
    """Whether searches rank with the embedding model: installed (``make install-semantic``) and
    not turned off (``BOOCODE_TOOL_SEARCH_SEMANTIC``). Looked up without importing it."""
    return settings.TOOL_SEARCH_SEMANTIC and _model_installed()


LEXICAL_WEIGHT = 0.05  # of the scaled lexical score, added to the semantic score
LEXICAL_SCALE = 12.0  # a BM25 score this high counts as a full lexical match
RECENT_BONUS = 0.05
# "No tool fits" when the best semantic score plus NO_FIT_LEXICAL times the best scaled lexical
# score is under NO_FIT: the highest threshold that cost at most 2 points of recall@5 on half A of
# bench/fixtures' requests (half B checks it: bench/tool_search.py --half, docs/tools.md).
NO_FIT = 0.34
NO_FIT_LEXICAL = 0.1
NO_FIT_WORDS = 0.05  # without the semantic model: "no tool fits" under this best scaled lexical score
DESCRIPTION_CHARS = 300  # of the description embedded under the tool's name
# A request is embedded as what someone wants to do, which the search tool asks the model to
# write. The best of a few framings on half A of bench/fixtures' requests; it gained 2 to 3 points
# of recall@5 on both halves, paraphrases most (docs/tools.md).
REQUEST_FRAME = "I want to: {}"
DEFAULT_LIMIT = 5
MAX_QUERY_CHARS = 1000
K1, B = 1.2, 0.75
# Field weights of the lexical score (the name, split into words, says most).
WEIGHTS = {"name": 3.0, "title": 2.0, "server": 1.5, "description": 1.0, "parameters": 0.6, "about": 0.4}
EMBEDDING_CACHE = 20_000  # texts whose embeddings are kept
# A request of several steps ("find the failing job, then open an issue about it") is ranked
# for the whole and for its first step, weighted FIRST_STEP_WEIGHT: what the model needs first.
FIRST_STEP_WEIGHT = 0.5
_NEXT_STEP = re.compile(
    r",?\s+(?:and then|then|and after that|after that|so that|so i can|and)\s+|[;.]\s+", re.IGNORECASE
)

STOP_WORDS = frozenset(
    """a an the and or of to in on for with from by at as is are be been was were it its this that these
    those i me my we our you your he she they them their please can could would should will shall may
    might must do does did done doing have has had having so if then than too very just also any all
    some there here what which who whom whose when where why how into onto about over under again out
    up down off not no nor only own same such both each few more most other s t let lets want wanna need
    get got make sure thing things something anything using use via tool tools""".split()
)
# What a request acts on rather than what it asks to do: quoted text, URLs, paths, and words with
# digits in them (ids, versions, times). Left out of what is embedded.
_VALUES = re.compile(r"`[^`]*`|'[^']*'(?!\w)|\"[^\"]*\"|\S*://\S*|\S*[/\\]\S*|\S*\d\S*")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_WORD = re.compile(r"[a-z0-9]+")


@dataclass(frozen=True)
class Candidate:
    """A tool as the ranker sees it: who it is and what it says about itself."""

    key: str  # unique among the candidates (the prefixed name)
    server: str
    name: str  # its own name on its server
    title: str = ""
    description: str = ""
    parameters: dict[str, Any] | None = None  # its input schema
    about: str = ""  # what its server says it is for

    @classmethod
    def from_listing(cls, server: str, tool: dict[str, Any], about: str = "", key: str = "") -> Candidate:
        """A candidate from a ``tools/list`` entry as a server returns it."""
        annotations = tool.get("annotations") or {}
        title = tool.get("title") or (annotations.get("title") if isinstance(annotations, dict) else "") or ""
        return cls(
            key=key or f"{server}_{tool['name']}",
            server=server,
            name=str(tool["name"]),
            title=str(title),
            description=str(tool.get("description") or ""),
            parameters=tool.get("inputSchema") if isinstance(tool.get("inputSchema"), dict) else None,
            about=about,
        )

    def fields(self) -> dict[str, str]:
        """The text of each weighted field."""
        return {
            "name": split_name(self.name),
            "title": self.title,
            "server": split_name(self.server),
            "description": self.description,
            "parameters": parameter_text(self.parameters),
            "about": self.about,
        }

    def semantic_texts(self) -> tuple[str, str, str]:
        """What the embedding model reads of the tool, three ways (their cosines are averaged).

        The whole tool (:meth:`semantic_text`), its name alone under its server's, and its
        description under its name: a short request matches a short text best, and a long text
        of many parameters can hide a name that says it all.
        """
        heading = self.title or split_name(self.name)
        described = " ".join(self.description.split())[:DESCRIPTION_CHARS]
        return (
            self.semantic_text(),
            f"{split_name(self.server)}: {split_name(self.name)}",
            f"{heading}: {described}" if described else heading,
        )

    def semantic_text(self) -> str:
        """The whole tool as the embedding model reads it: what it does, then where (its server)."""
        heading = self.title or split_name(self.name)
        described = " ".join(self.description.split())[:500]
        parameters = parameter_text(self.parameters, descriptions=False)
        text = f"{heading}: {described}" if described else heading
        if parameters:
            text += f" ({parameters})"
        where = split_name(self.server)
        about = " ".join(self.about.split())[:200]
        return f"{text} [{where}: {about}]" if about else f"{text} [{where}]"


@dataclass(frozen=True)
class Hit:
    """One ranked tool."""

    key: str
    server: str
    name: str
    score: float

    def to_dict(self) -> dict[str, Any]:
        """``{"server", "tool", "score"}`` (the command's and the search tool's shape)."""
        return {"server": self.server, "tool": self.name, "score": round(self.score, 4)}


def split_name(name: str) -> str:
    """``listPullRequests`` / ``get_issue-comments`` → ``list Pull Requests`` / ``get issue comments``."""
    return " ".join(_CAMEL.sub(" ", re.sub(r"[_\-./:]+", " ", name)).split())


def parameter_text(schema: dict[str, Any] | None, *, descriptions: bool = True) -> str:
    """The names (split into words) and, with ``descriptions``, the descriptions of a schema's properties."""
    properties = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(properties, dict):
        return ""
    parts = []
    for name, spec in list(properties.items())[:30]:
        parts.append(split_name(str(name)))
        if descriptions and isinstance(spec, dict) and isinstance(spec.get("description"), str):
            parts.append(spec["description"][:200])
    return " ".join(parts)


def stem(word: str) -> str:
    """A light stemmer: plurals, -ing, -ed (enough to meet "files" with "file", "listing" with "list")."""
    if len(word) <= 3:
        return word
    for suffix, replacement in (("ies", "y"), ("sses", "ss"), ("ing", ""), ("ed", ""), ("es", ""), ("s", "")):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            if suffix == "s" and word.endswith(("ss", "us", "is")):
                return word
            return word[: len(word) - len(suffix)] + replacement
    return word


def first_step(query: str) -> str:
    """The first step of a request of several ("" when it has one)."""
    first = _NEXT_STEP.split(query, maxsplit=1)[0].strip()
    return first if first and first != query else ""


def without_values(query: str) -> str:
    """``query`` without the values it carries (quoted text, URLs, paths, ids), if words are left.

    "read ~/notes/todo.txt" asks to read a file, not for a tool about to-dos.
    """
    stripped = " ".join(_VALUES.sub(" ", query).split())
    return stripped if len(words(stripped)) >= 2 else query


def _weighed(whole: list[float], step: list[float]) -> list[float]:
    """Scores for a whole request and for its first step, weighed together."""
    return [(1 - FIRST_STEP_WEIGHT) * a + FIRST_STEP_WEIGHT * b for a, b in zip(whole, step, strict=True)]


def words(text: str) -> list[str]:
    """The stemmed content words of ``text``."""
    return [stem(word) for word in _WORD.findall(split_name(text).lower()) if word not in STOP_WORDS]


@dataclass
class _Document:
    candidate: Candidate
    terms: dict[str, float]  # weighted term frequencies
    length: float


class Embeddings:
    """Embeddings of texts, computed once each (kept for :data:`EMBEDDING_CACHE` texts).

    They are also kept on disk (``<data>/cache/tool-embeddings-<model>.npz``), so a restarted
    process does not embed its servers' tools again: a file that cannot be read is ignored.
    """

    def __init__(self) -> None:
        self._vectors: OrderedDict[str, Any] = OrderedDict()
        self._lock = threading.Lock()
        self._read = False

    @staticmethod
    def path() -> Path:
        return Path(settings.DATA_DIR) / "cache" / f"tool-embeddings-{_embedding().MODEL_SHA256[:12]}.npz"

    def _read_disk(self) -> None:
        self._read = True
        try:
            with _embedding().np.load(self.path()) as stored:
                for key, vector in zip(stored["keys"].tolist(), stored["vectors"], strict=True):
                    self._vectors[str(key)] = vector
        except (OSError, ValueError, KeyError):  # none yet, or unreadable: embedded again
            return

    def _write_disk(self) -> None:
        path = self.path()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            keys = _embedding().np.array(list(self._vectors), dtype="U64")
            vectors = _embedding().np.stack(list(self._vectors.values()))
            partial = path.with_suffix(".partial.npz")
            _embedding().np.savez(partial, keys=keys, vectors=vectors)
            partial.replace(path)
        except OSError as exc:
            logger.warning("tool embeddings not kept on disk: %s", exc)

    def of(self, encoder: embedding.Encoder, texts: Sequence[str]) -> Any:
        """One row per text (computed now for texts not seen before)."""
        keys = [hashlib.sha256(text.encode("utf-8")).hexdigest() for text in texts]
        with self._lock:
            if not self._read:
                self._read_disk()
            missing = [(key, text) for key, text in zip(keys, texts, strict=True) if key not in self._vectors]
        if missing:
            unique = dict(missing)
            vectors = encoder.encode(list(unique.values()))
            with self._lock:
                for key, vector in zip(unique, vectors, strict=True):
                    self._vectors[key] = vector
                while len(self._vectors) > EMBEDDING_CACHE:
                    self._vectors.popitem(last=False)
                self._write_disk()
        with self._lock:
            rows = [self._vectors.get(key) for key in keys]
        if any(row is None for row in rows):  # (evicted meanwhile: more texts than the cache holds)
            return encoder.encode(list(texts))
        return _embedding().np.stack(rows) if rows else _embedding().np.zeros((0, _embedding().DIMENSIONS))


EMBEDDINGS = Embeddings()


@dataclass
class Index:
    """The tools of one search, ready for queries (see the module docstring)."""

    candidates: Sequence[Candidate]
    encoder: embedding.Encoder | None = None
    documents: list[_Document] = field(init=False)
    postings: dict[str, list[tuple[int, float]]] = field(init=False)
    idf: dict[str, float] = field(init=False)
    average: float = field(init=False)
    vectors: Any = field(init=False, default=None)  # (the three texts of each tool, one matrix each)

    def __post_init__(self) -> None:
        self.documents = []
        for candidate in self.candidates:
            terms: defaultdict[str, float] = defaultdict(float)
            for name, text in candidate.fields().items():
                for word in words(text):
                    terms[word] += WEIGHTS[name]
            self.documents.append(_Document(candidate, terms, sum(terms.values())))
        self.average = sum(d.length for d in self.documents) / max(len(self.documents), 1) or 1.0
        self.postings = {}
        for number, document in enumerate(self.documents):
            for term, frequency in document.terms.items():
                self.postings.setdefault(term, []).append((number, frequency))
        count = len(self.documents)
        self.idf = {
            term: math.log(1 + (count - len(found) + 0.5) / (len(found) + 0.5))
            for term, found in self.postings.items()
        }
        if self.encoder is not None and self.documents:
            texts = [c.semantic_texts() for c in self.candidates]
            rows = EMBEDDINGS.of(self.encoder, [text for three in texts for text in three])
            self.vectors = rows.reshape(len(texts), 3, -1).transpose(1, 0, 2).copy()

    def lexical(self, query: str) -> list[float]:
        """The BM25 score of each candidate for ``query``."""
        scores = [0.0] * len(self.documents)
        for term in set(words(query)):
            idf = self.idf.get(term)
            if idf is None:
                continue
            for number, frequency in self.postings[term]:
                length = self.documents[number].length
                norm = K1 * (1 - B + B * length / self.average)
                scores[number] += idf * frequency * (K1 + 1) / (frequency + norm)
        return scores

    def _scaled_lexical(self, query: str, first: str) -> list[float]:
        """The lexical scores scaled into 0..1, the first step weighed in when there is one."""
        scaled = [min(score / LEXICAL_SCALE, 1.0) for score in self.lexical(query)]
        if not first:
            return scaled
        step = [min(score / LEXICAL_SCALE, 1.0) for score in self.lexical(first)]
        return _weighed(scaled, step)

    def rank(self, query: str, *, limit: int = DEFAULT_LIMIT, recent: Iterable[str] = ()) -> list[Hit]:
        """The best ``limit`` tools for ``query``, best first; ``[]`` when no tool fits."""
        query = " ".join(query.split())[:MAX_QUERY_CHARS]
        if not query or not self.documents:
            return []
        first = first_step(query)
        lexical = self._scaled_lexical(query, first)
        used = set(recent)
        if self.encoder is not None and self.vectors is not None:
            texts = [REQUEST_FRAME.format(without_values(text)) for text in (query, first) if text]
            vectors = self.encoder.encode(texts)
            semantic = (self.vectors @ vectors[0]).mean(0).tolist()
            if first:
                step = (self.vectors @ vectors[1]).mean(0).tolist()
                semantic = _weighed(semantic, step)
            if max(semantic) + NO_FIT_LEXICAL * max(lexical) < NO_FIT:
                return []
            scores = [s + LEXICAL_WEIGHT * lex for s, lex in zip(semantic, lexical, strict=True)]
            floor = -math.inf
        else:
            scores, floor = lexical, NO_FIT_WORDS
        # A tool that shares nothing with the request (a score of 0: no word and, without the
        # model, no meaning) is never found, however few tools match: the model would be handed
        # tools picked by their order in the list. The recent bonus only reorders matches.
        matched = [(score, number) for number, score in enumerate(scores) if score > 0]
        if not matched or max(score for score, _ in matched) < floor:
            return []
        ranked = sorted(
            (
                (score + (RECENT_BONUS if self.documents[number].candidate.key in used else 0.0), number)
                for score, number in matched
            ),
            reverse=True,
        )
        hits = []
        for score, number in ranked[: max(limit, 0)]:
            candidate = self.documents[number].candidate
            hits.append(Hit(candidate.key, candidate.server, candidate.name, score))
        return hits


_indexes: OrderedDict[str, Index] = OrderedDict()
_indexes_lock = threading.Lock()
MAX_INDEXES = 16  # tool sets kept ready (agents, and people with tools of their own)


_building: dict[str, Future[Index]] = {}


def index_for(candidates: Sequence[Candidate]) -> Index:
    """The index of ``candidates`` (built once per set of tools and kept while it is in use).

    A set being built by another thread is waited for, not built twice (a turn starts building
    the index of its agent's tools before the model asks for a search).
    """
    digest = hashlib.sha256()
    for c in candidates:  # everything the index reads of each tool
        digest.update("\x00".join((c.key, c.server, c.name, c.title, c.description, c.about)).encode())
        digest.update(json.dumps(c.parameters, ensure_ascii=False).encode() + b"\x01")
    key = digest.hexdigest()
    with _indexes_lock:
        found = _indexes.get(key)
        if found is not None:
            _indexes.move_to_end(key)
            return found
        building = _building.get(key)
        mine = building is None
        if building is None:
            building = _building[key] = Future()
    if not mine:
        return building.result()
    try:
        built = Index(list(candidates), _embedding().encoder())
    except BaseException as exc:
        building.set_exception(exc)
        raise
    finally:
        with _indexes_lock:
            _building.pop(key, None)
    with _indexes_lock:
        _indexes[key] = built
        while len(_indexes) > MAX_INDEXES:
            _indexes.popitem(last=False)
    building.set_result(built)
    return built
