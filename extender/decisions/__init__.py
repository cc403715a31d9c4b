"""Pure decisions: the snapshot model, pods, scoring, tables, the engine, the herd guard,
explanations, shadow verdicts, overload decisions and the wire format. No I/O."""
