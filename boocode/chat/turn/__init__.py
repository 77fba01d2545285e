"""One turn of a conversation, from the person's message to ``turn_end``.

Owns the turn loop (``loop``) and what it gathers before the model request (``context``), the
answer being streamed (``answer``), the tool step (``tool_step``), the hold on the owner's budget
(``budget_hold``), summaries of the earlier turns (``compacting``), the running turns
(``registry``) and their cross-process lock (``locks``), the tool console (``console``), titles
(``titles``), prompts inserted into a conversation (``prompt_insertion``), the agent a
conversation picks (``agent_choice``) and the skills it starts with (``agent_skills``), the
conversation's rows as the turn writes them (``conversations``), the history as the model reads
it (``history``) and the start-up check of models' windows (``window_check``).

May import :mod:`boocode.chat.calls`, :mod:`boocode.chat.wire`, :mod:`boocode.chat.llm`,
:mod:`boocode.chat.ledger`, ``models`` and ``storable``; never :mod:`boocode.chat.web`.
"""
