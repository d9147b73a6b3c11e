
2
xPlaceholder*
shape
:*
dtype0

mmMatMulxx*
T0