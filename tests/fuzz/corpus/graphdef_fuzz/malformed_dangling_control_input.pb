

xPlaceholder*
dtype0

nNegx^ghost*
T0