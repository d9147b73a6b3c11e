
NoOp