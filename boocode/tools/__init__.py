"""The tools the model may call: native read-only tools and the MCP servers' tools, as one registry.

Owns the tool list (:mod:`.registry`, its value :mod:`.tool`), the agent's rules
(:mod:`.agent_rules`), argument validation (:mod:`.arguments`), running a call within its time
limits (:mod:`.execution`, :mod:`.runners`) and the approval gate every call that needs approval
passes. May import :mod:`agents` (the glob policy) and :mod:`mcpclient`, never
:mod:`boocode.chat`: whoever runs a call puts its approval gate in the context.
"""
