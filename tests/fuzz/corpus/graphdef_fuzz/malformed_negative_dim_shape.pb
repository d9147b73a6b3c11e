
7
xPlaceholder*
shape:ûÿÿÿÿÿÿÿÿ*
dtype0