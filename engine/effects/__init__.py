"""Effects as data, and the rules over them: what the fold asks the outside world to do
(``models``), which pending effect may be issued now (``timers``), Kubernetes name rules
(``k8s_names``) and the field trim applied to what is observed (``object_trim``). All pure.

The I/O that performs effects and observes clusters is ``engine.effects.io``; nothing in this
package, nor in the rest of ``engine``, imports it (import-linter holds this).
"""
