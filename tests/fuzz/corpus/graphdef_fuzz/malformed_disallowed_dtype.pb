

xPlaceholder*
dtype0


mmMatMulxx*
T0
