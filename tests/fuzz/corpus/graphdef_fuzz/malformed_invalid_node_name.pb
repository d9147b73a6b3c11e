

a:bNoOp