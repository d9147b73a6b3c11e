
N
tableVarHandleOp*
shape
:*
shared_nametable*
dtype0
0
idsPlaceholder*
shape:*
dtype0
N
gResourceGathertableids*
Tindices0*

batch_dims*
dtype0