

xPlaceholder*
dtype0

nNegx:one*
T0